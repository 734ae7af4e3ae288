"""Prompts with arguments, argument completion, and two versions of one prompt."""

from toolkernel import MCPServer, Prompt, PromptArgument, prompt

LANGUAGES = ["python", "rust", "typescript"]


@prompt(
    description="Explain a piece of code.",
    complete={"language": lambda prefix: [lang for lang in LANGUAGES if lang.startswith(prefix)]},
)
def explain(code: str, language: str = "python") -> str:
    return f"Explain this {language} code:\n\n{code}"


summarize_v1 = Prompt(
    name="summarize",
    version="2024-01",
    render=lambda text: f"Summarize: {text}",
    arguments=[PromptArgument("text", "The text to summarize.", required=True)],
)
summarize_v2 = Prompt(
    name="summarize",
    version="2025-06",
    render=lambda text: [
        {"role": "user", "content": {"type": "text", "text": f"Summarize in three bullets:\n{text}"}}
    ],
    arguments=[PromptArgument("text", "The text to summarize.", required=True)],
)

app = MCPServer("prompts", prompts=[explain, summarize_v1, summarize_v2])
