"""Agents become ``ask_<key>`` tools, workflows become ``run_<key>`` tools."""

from pydantic import BaseModel

from toolkernel import MCPServer


class EchoAgent:
    description = "Repeats what you say, politely."

    async def generate(self, message):
        return f"You said: {message}"  # or an object with a .text attribute


class Invoice(BaseModel):
    customer: str
    amount: float


class Receipt(BaseModel):
    number: str
    total: float


class BillingWorkflow:
    input_model = Invoice
    output_model = Receipt  # optional: becomes the tool's output schema
    description = "Bill a customer and return the receipt."

    async def run(self, invoice):
        return Receipt(number=f"R-{invoice.customer[:3].upper()}", total=round(invoice.amount * 1.2, 2))


app = MCPServer(
    "office",
    "2.0.0",
    agents={"echo": EchoAgent()},
    workflows={"billing": BillingWorkflow()},
)
