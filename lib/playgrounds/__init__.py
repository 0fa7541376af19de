"""Interactive playgrounds (ipywidgets), each driven by a pure function that tests call.

One module a playground:
    ``self_attention``  chapter 1: which query reads, how the scores are scaled, the causal mask;
    ``rope``            chapter 3: move both positions, change the gap;
    ``complexity``      chapter 5: edge counts of attention patterns against N.

Each has three layers: a pure function that computes (tested), a function that draws one
state (the static figure in the built book), and one that wires widgets to the two.
"""
