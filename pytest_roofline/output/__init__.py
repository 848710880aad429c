"""What a run leaves behind: records, the terminal table and the JSON file (:mod:`.report`), the
Markdown section (:mod:`.markdown`), the plot (:mod:`.plot`), and baselines: reading one
(:mod:`.baseline`), comparing with it (:mod:`.comparison`) and keeping several runs in it
(:mod:`.history`). No pytest here.
"""
