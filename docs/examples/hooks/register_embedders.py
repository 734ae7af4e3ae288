"""A toy embedder provider: ``hashing/<dimension>`` hashes words into a unit vector.

It needs no model and no network, which makes it handy in tests; it is not a
semantic embedding.
"""

import hashlib
import math

from toolkernel import hookimpl


class HashingEmbedder:
    def __init__(self, model):
        if not model.isdigit():
            raise ValueError(f"hashing/{model}: the model is the dimension, e.g. hashing/64")
        self.name = f"hashing/{model}"
        self.dimension = int(model)

    async def embed(self, texts):
        return [self._one(text) for text in texts]

    def _one(self, text):
        vector = [0.0] * self.dimension
        for word in text.lower().split():
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            vector[int.from_bytes(digest, "little") % self.dimension] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]


@hookimpl
def register_embedders(registry):
    registry.add("hashing", HashingEmbedder)
