"""What seed 004 shows: its ``wordcount.txt`` and what its programs print.

One copy for the tests that run the seed's programs in-process
(``test_seed_004.py``) and as the example script (``test_flow_examples.py``).
The listings are in the seed's order, which is no order within an epoch.
"""

from __future__ import annotations

import ast

#: The seed's wordcount.txt.
HAMLET = """\
To be, or not to be, that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune,
Or to take arms against a sea of troubles
And by opposing end them.
"""

#: What seed 004 prints for "Input example" (one epoch), in the seed's order.
SEED_ONE_EPOCH = """\
('fortune', 1)
('a', 1)
('whether', 1)
('them', 1)
('nobler', 1)
("'tis", 1)
('arrows', 1)
('slings', 1)
('and', 2)
('outrageous', 1)
('sea', 1)
('by', 1)
('or', 2)
('not', 1)
('opposing', 1)
('question', 1)
('mind', 1)
('that', 1)
('to', 4)
('end', 1)
('arms', 1)
('suffer', 1)
('take', 1)
('in', 1)
('against', 1)
('is', 1)
('of', 2)
('the', 3)
('be', 2)
('troubles', 1)
"""

#: What seed 004 prints for "Multiple epochs" (one epoch per line), in the seed's order.
SEED_MULTIPLE_EPOCHS = """\
('not', 1)
('that', 1)
('or', 1)
('the', 1)
('be', 2)
('is', 1)
('question', 1)
('to', 2)
('mind', 1)
("'tis", 1)
('to', 1)
('nobler', 1)
('the', 1)
('in', 1)
('whether', 1)
('suffer', 1)
('the', 1)
('of', 1)
('slings', 1)
('arrows', 1)
('outrageous', 1)
('fortune', 1)
('and', 1)
('troubles', 1)
('sea', 1)
('against', 1)
('to', 1)
('of', 1)
('a', 1)
('or', 1)
('take', 1)
('arms', 1)
('them', 1)
('opposing', 1)
('end', 1)
('and', 1)
('by', 1)
"""

#: What seed 004 prints for "Inspecting epochs" ("epoch item"), in the seed's order.
SEED_INSPECTING_EPOCHS = """\
0 ('to', 2)
0 ('question', 1)
0 ('is', 1)
0 ('not', 1)
0 ('that', 1)
0 ('or', 1)
0 ('be', 2)
0 ('the', 1)
1 ("'tis", 1)
1 ('in', 1)
1 ('to', 1)
1 ('suffer', 1)
1 ('whether', 1)
2 ('slings', 1)
2 ('of', 1)
2 ('arrows', 1)
1 ('nobler', 1)
1 ('the', 1)
1 ('mind', 1)
2 ('the', 1)
2 ('and', 1)
2 ('fortune', 1)
2 ('outrageous', 1)
3 ('of', 1)
3 ('arms', 1)
3 ('against', 1)
3 ('to', 1)
3 ('take', 1)
3 ('a', 1)
3 ('sea', 1)
3 ('or', 1)
3 ('troubles', 1)
4 ('and', 1)
4 ('end', 1)
4 ('them', 1)
4 ('by', 1)
4 ('opposing', 1)
"""

#: ``SEED_ONE_EPOCH`` as ``(word, count)`` items.
ONE_EPOCH: list[tuple[str, int]] = [ast.literal_eval(line) for line in SEED_ONE_EPOCH.splitlines()]
