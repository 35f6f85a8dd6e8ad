"""safetensors.torch's save_file and load_file over the stand-in's
serialize_file and safe_open, taken from the package as safetensors.torch
takes them (after its own `import torch`)."""
import torch  # noqa: F401

from safetensors import safe_open, serialize_file


def save_file(tensors, filename, metadata=None):
    serialize_file({k: v.contiguous() for k, v in tensors.items()}, filename, metadata=metadata)


def load_file(filename, device="cpu"):
    with safe_open(filename, framework="pt", device=device) as f:
        return {k: f.get_tensor(k) for k in f.keys()}
