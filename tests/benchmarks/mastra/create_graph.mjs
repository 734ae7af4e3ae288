// Times Mastra's GraphRAG.createGraph (@mastra/rag) on chunks and vectors written by graphrag_build.py.
// Usage: node create_graph.mjs INPUT.json THRESHOLD  ->  prints {"ms": CPU milliseconds, "edges": ..., "nodes": ...}
import { readFileSync } from "node:fs";
import { GraphRAG } from "@mastra/rag";

const [input, threshold] = process.argv.slice(2);
const { texts, vectors } = JSON.parse(readFileSync(input, "utf8"));
const chunks = texts.map((text) => ({ text, metadata: {} }));
const embeddings = vectors.map((vector) => ({ vector }));
const graph = new GraphRAG(vectors[0].length, Number(threshold));
const started = process.cpuUsage();
graph.createGraph(chunks, embeddings);
const used = process.cpuUsage(started);
const ms = (used.user + used.system) / 1000;
console.log(JSON.stringify({ ms, edges: graph.getEdges().length / 2, nodes: graph.getNodes().length }));
