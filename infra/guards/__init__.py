"""Synth-time checks over the synthesized templates: the replacement guard, the nag pack, the create-only data.

Constructs never import from here; the guards read templates, the config and the facts.
"""
