from .db import SCHEMA_VERSION, ResultsDB

__all__ = ["ResultsDB", "SCHEMA_VERSION"]
