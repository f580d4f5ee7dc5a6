"""Reward plug-ins shipped with tutorrl (entry-point group ``tutorrl.rewards``)."""
