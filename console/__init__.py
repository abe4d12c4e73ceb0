"""ddconsole: launch, watch and benchmark SGLang servers on multi-GPU hosts."""

__version__ = "0.1.0"
