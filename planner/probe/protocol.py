"""What the parent and the measuring child exchange: the cache tensors and the dtype tables."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

MAX_REQUEST_BYTES = 4 << 20
TORCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn", "int8": "int8", "int4": "uint8"}
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "int8": 1, "uint8": 1}
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


class CacheTensor(BaseModel):
    """One tensor the allocate mode creates."""

    model_config = ConfigDict(frozen=True)

    layer: str
    role: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEMSIZE[self.dtype]
