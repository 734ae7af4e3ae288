"""A plugin that contributes a code review prompt in two versions."""

from toolkernel import hookimpl, prompt


@prompt(name="review", version="1", description="Review a diff.")
def review_v1(diff: str) -> str:
    return f"Review this diff:\n\n{diff}"


@prompt(name="review", version="2", description="Review a diff, with a focus.")
def review_v2(diff: str, focus: str = "correctness") -> list[dict]:
    return [
        {"role": "assistant", "content": {"type": "text", "text": f"I review for {focus}."}},
        {"role": "user", "content": {"type": "text", "text": diff}},
    ]


@hookimpl
def register_prompts(registry):
    registry.add(review_v1)
    registry.add(review_v2)  # added last, so clients get version 2 unless they ask for 1
