#!/bin/sh
# The greedy measurement of pi-raft-tvar-20, made after the run: its
# starter (policy v1) and its kept policy (v21, iteration 20's checkpoint)
# evaluated greedily (--top-k 1) on the run's own 400 held-out tasks, with
# the run's rollout limits, then paired by task with legorl compare into
# greedy.compare.json. Needs the run's work folder (WORK, default
# legorl-work/pi-raft-tvar-20/work) and Node.js; about 25 minutes on 2 cores.
set -e
W=${WORK:-legorl-work/pi-raft-tvar-20/work}
S=file://$PWD/legorl-work/pi-raft-tvar-20-greedy/store
for pair in "1 $W/checkpoints/starter-pi-sft" "21 $W/checkpoints/iter-000020"; do
	set -- $pair
	bin/legorl eval --tasks "$W/pools/eval-heldout.jsonl" --harness pi --policy "$2" --run pi-raft-tvar-20-greedy --iteration "$1" \
		--top-k 1 --max-turns 4 --max-tokens 128 --split heldout --store "$S"
done
bin/legorl compare --store "$S" --before pi-raft-tvar-20-greedy@1 --after pi-raft-tvar-20-greedy@21 \
	--out docs/results/pi-raft-tvar-20/greedy.compare.json
