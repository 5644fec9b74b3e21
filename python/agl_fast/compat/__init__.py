"""Drop-in compatibility layers for code written against other libraries."""
