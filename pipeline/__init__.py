"""vpeval: end-to-end evaluation of voice anonymisation against semi-informed attackers."""
__version__ = "0.1.0"
