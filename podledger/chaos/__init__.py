"""`podledger chaos`: the whole pipeline on the real parts, under churn and faults.

Sim node agents, two fold workers and the sink run against a real Kafka broker and kube-apiserver
while API pods come and go; meanwhile fold workers, the sink and node agents are SIGKILLed at
random (seeded), the broker is restarted on its data directory and the apiserver is stopped for a
while. Afterwards the run checks that no input was lost, that versions have no gap and never two
statuses, that the live history equals the offline fold of the journal, and that the apiserver
shows the last versions.

Modules: `plan` (the seeded schedule of faults and the pods of the churn, pure), `checks` (the
checks over decoded records, pure), `config` (what a run is asked and what it found), `services`
(the processes, killed and restarted), `pipeline` (the pipeline's processes and their supervisor),
`churn` (the API pods deleted and created), `faults` (the planned faults performed), `watch` (the
history, the catch-up and the drain while it runs), `snapshot` (the topics read at one moment),
`verdict` (the checks, figures and explained failures at the end, pure), `orchestration` (the run
from set-up to verdict) and `run` (`run_chaos`, the entry point, with signal handling).
"""
