"""Who may let a step happen: hooks around calls and actions (:mod:`.hooks`) and human
approval of steps (:mod:`.approval`).
"""
