"""Case families, one module each (gen.py imports every module here)."""
