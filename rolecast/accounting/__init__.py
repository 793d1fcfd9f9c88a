"""What a run spends and may spend: token and dollar cost (:mod:`.cost`), the meter that charges
each call to its budget and role (:mod:`.metering`) and rate limits (:mod:`.ratelimit`).
"""
