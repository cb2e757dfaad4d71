"""The programs the plan starts in child processes (``python -m``): measuring one part of
a plan on this machine (:mod:`~yomiage.plan_child.measure`) and making a decoder in
another layout of its stages (:mod:`~yomiage.plan_child.layout`).

They are programs of their own, above the runtime: a measuring process builds a whole
engine, and the layout is rewritten by export code, neither of which the runtime may
import. The plan (:mod:`yomiage.runtime.plan`) starts them by module name and reads
what they print.
"""
