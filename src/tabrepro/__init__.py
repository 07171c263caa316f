"""tabrepro: reproduce deep tabular learning papers (NPT, BiSHop) end to end."""

__version__ = "0.1.0"
