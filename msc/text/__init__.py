"""msc's text format: deterministic printing and a parser with line/column errors."""

from msc.ir.graph import set_printer
from msc.text.parser import ParseError, from_text, parse_dim
from msc.text.printer import format_type, quote_name, to_text

set_printer(to_text)

__all__ = ["to_text", "from_text", "parse_dim", "ParseError", "format_type", "quote_name"]
