"""The library behind "Transformers & Attention, an executable textbook".

One concept per module; each module's docstring names the chapter it serves. A regular
package (not a namespace package), so two checkouts on one path never merge their modules.
"""
