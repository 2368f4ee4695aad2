"""MySQL's functions for the proxy's one expression evaluator (``rewriter.evaluate``), one
module per family: ``control`` (CASE, IF, COALESCE, ...), ``strings``, ``numeric``,
``cast`` (CAST/CONVERT), ``temporal`` (date and time functions), ``bits`` (bit operators). ``registry`` finds the
function of a call; ``values`` holds MySQL's implicit conversions; ``signature`` what a
function is (its value and its result type). Non-deterministic functions (NOW, RAND,
UUID, ...) are not here: a statement using them is refused at the proxy and runs where
MySQL evaluates it."""
