"""What a run leaves behind: the typed records every output reads (:mod:`.records`), the JSON file
(:mod:`.jsonfile`), the terminal table (:mod:`.table`), the Markdown section (:mod:`.markdown`), the
plot (:mod:`.plot`), the markers that pin an inferred op (:mod:`.suggestions`), and baselines: reading
one (:mod:`.baseline`), comparing with it (:mod:`.comparison`), saving a run into it (:mod:`.store`),
and joining a sharded run's reports (:mod:`.merge`). No pytest here.
"""
