"""servelab: the course workbook for Lesson 25, "Reviewing a Serving Configuration"."""

__version__ = "0.1.0"
