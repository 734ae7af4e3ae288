"""A server whose lists come in pages of two: clients follow nextCursor for the rest."""

from toolkernel import MCPServer, Prompt

app = MCPServer("catalog", "1.0.0", page_size=2)

for n in range(5):
    app.add_prompt(Prompt(name=f"template_{n}", render=lambda n=n: f"Template number {n}."))
