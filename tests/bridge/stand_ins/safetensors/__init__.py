"""A stand-in for safetensors where it is not installed (the tests' CPU
machines): its names where safetensors keeps them (serialize_file and
safe_open in the package, which safetensors.torch imports from there), and
its bytes written and read outside Python's open, as its Rust core does.
The format is torch's, not safetensors'."""
import io
import os


def _write(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _read(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        out = b""
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return out
            out += chunk
    finally:
        os.close(fd)


def serialize_file(tensors, filename, metadata=None):
    import torch
    buf = io.BytesIO()
    torch.save({"tensors": tensors, "metadata": metadata}, buf)
    _write(os.fspath(filename), buf.getvalue())


class safe_open:
    def __init__(self, filename, framework="pt", device="cpu"):
        import torch
        self._data = torch.load(io.BytesIO(_read(os.fspath(filename))), map_location=device)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def keys(self):
        return list(self._data["tensors"])

    def get_tensor(self, name):
        return self._data["tensors"][name]
