"""Plan classes below heuristics/, exact/ and hetero/ (which may all import
them): :mod:`.staged` (the staged R/S/X encoding of Checkmate and XEngine),
:mod:`.sequence` (the minimal-memory plan of a compute sequence) and
:mod:`.reductions` (relabel / sub-problem layers)."""
