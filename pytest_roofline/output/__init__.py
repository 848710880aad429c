"""What a run leaves behind: the typed records every output reads (:mod:`.records`), the JSON file
(:mod:`.jsonfile`), the terminal table (:mod:`.table`; :mod:`.report` keeps the names these three
had when they were one module), the Markdown section (:mod:`.markdown`), the plot (:mod:`.plot`),
and baselines: reading one (:mod:`.baseline`), comparing with it (:mod:`.comparison`), saving a run
into it (:mod:`.store`), and joining a sharded run's reports (:mod:`.merge`). No pytest here.
"""
