"""The QEMU per-thread CPU accounting of issue 17 (vmbench/telemetry/qemu_cpu.py): the snapshot
command, parsing real /proc text, thread classes from QEMU's own names, the accounting (EXITED,
accounted share, idle subtraction, context switches, the rest of the host, the cgroup), the JSON
row (perf's cycles: test_perf.py)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from vmbench.telemetry import qemu_cpu as q
from vmbench.telemetry.qemu_cpu import ThreadClass as C

# Real captures: snapshot_argv(pid) run on this machine (Debian 12, QEMU 7.2, TCG guests under
# libvirt, cgroup v1 + v2 hybrid) against the QEMU processes the integration tests boot.
# TCG_0..2: one guest 4 s apart; between TCG_1 and TCG_2 the thread pool's worker 10448 exited
# (it idled out after 10 s, util/thread-pool.c).  RCU_0/1: another guest 3 s apart, five
# workers and a named call_rcu (in the first guest call_rcu kept the process's name).
# Trimmed: the cgroup v1 lines ("cgroup N:controller:path") and cpu.stat's nice_usec.
# No guest here had an iothread: the tests that need one rename a thread.

TCG_0 = """\
@qemu-cpu 1
pid 10442
time 1795514443.866649983
clk_tck 100
host cpu  1658804 18 333334 879959 44203 0 19250 3308 2 0
proc 10442 (qemu-system-x86) S 1 10441 10441 0 -1 138412416 14695 0 11 0 398 62 0 0 20 0 6 0 1485572 2123509760 66462 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 268444224 4096 16451 0 0 0 17 1 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
task 10442
comm qemu-system-x86
stat 10442 (qemu-system-x86) S 1 10441 10441 0 -1 138412416 7823 0 3 0 2 5 0 0 20 0 6 0 1485572 2123509760 66462 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 268444224 4096 16451 1 0 0 17 1 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 1224 220
task 10446
comm qemu-system-x86
stat 10446 (qemu-system-x86) S 1 10441 10441 0 -1 4194368 2 0 0 0 0 0 0 0 20 0 6 0 1485578 2123509760 66462 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 0 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 67 0
task 10447
comm worker
stat 10447 (worker) S 1 10441 10441 0 -1 138412224 29 0 0 0 0 0 0 0 20 0 6 0 1485578 2123509760 66462 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 8 2
task 10448
comm worker
stat 10448 (worker) S 1 10441 10441 0 -1 138412224 18 0 0 0 0 0 0 0 20 0 6 0 1485578 2123509760 66462 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 10 0
task 10449
comm IO mon_iothread
stat 10449 (IO mon_iothread) S 1 10441 10441 0 -1 138412224 11 0 0 0 3 16 0 0 20 0 6 0 1485578 2123509760 66462 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 0 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 698 26
task 10450
comm CPU 0/TCG
stat 10450 (CPU 0/TCG) R 1 10441 10441 0 -1 138412224 6812 0 8 0 392 39 0 0 20 0 6 0 1485578 2123509760 66462 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 0 0 0 -1 1 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 199 95
cgroup 0::/machine/qemu-43-vmbench-r18396f46-1.libvirt-qemu/emulator
cgroup_cpu /sys/fs/cgroup/unified/machine/qemu-43-vmbench-r18396f46-1.libvirt-qemu
cpustat usage_usec 4617960
cpustat user_usec 4001151
cpustat system_usec 616808
.
"""

TCG_1 = """\
@qemu-cpu 1
pid 10442
time 1795514447.880730800
clk_tck 100
host cpu  1659168 18 333386 880338 44203 0 19250 3308 2 0
proc 10442 (qemu-system-x86) S 1 10441 10441 0 -1 138412416 16984 0 11 0 757 108 0 0 20 0 6 0 1485572 2125606912 114140 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 268444224 4096 16451 0 0 0 17 0 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
task 10442
comm qemu-system-x86
stat 10442 (qemu-system-x86) S 1 10441 10441 0 -1 138412416 7823 0 3 0 4 8 0 0 20 0 6 0 1485572 2125606912 114140 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 268444224 4096 16451 1 0 0 17 0 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 3220 220
task 10446
comm qemu-system-x86
stat 10446 (qemu-system-x86) S 1 10441 10441 0 -1 4194368 2 0 0 0 0 0 0 0 20 0 6 0 1485578 2125606912 114140 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 0 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 89 0
task 10447
comm worker
stat 10447 (worker) S 1 10441 10441 0 -1 138412224 29 0 0 0 0 0 0 0 20 0 6 0 1485578 2125606912 114140 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 8 2
task 10448
comm worker
stat 10448 (worker) S 1 10441 10441 0 -1 138412224 18 0 0 0 0 0 0 0 20 0 6 0 1485578 2125606912 114140 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 10 0
task 10449
comm IO mon_iothread
stat 10449 (IO mon_iothread) S 1 10441 10441 0 -1 138412224 11 0 0 0 3 16 0 0 20 0 6 0 1485578 2125606912 114140 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 0 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 698 26
task 10450
comm CPU 0/TCG
stat 10450 (CPU 0/TCG) R 1 10441 10441 0 -1 138412224 9101 0 8 0 746 85 0 0 20 0 6 0 1485578 2125606912 114140 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 0 0 0 -1 1 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 283 269
cgroup 0::/machine/qemu-43-vmbench-r18396f46-1.libvirt-qemu/emulator
cgroup_cpu /sys/fs/cgroup/unified/machine/qemu-43-vmbench-r18396f46-1.libvirt-qemu
cpustat usage_usec 8669228
cpustat user_usec 7587614
cpustat system_usec 1081614
.
"""

TCG_2 = """\
@qemu-cpu 1
pid 10442
time 1795514451.891279844
clk_tck 100
host cpu  1659565 18 333404 880716 44203 0 19250 3308 2 0
proc 10442 (qemu-system-x86) R 1 10441 10441 0 -1 138412416 18023 0 11 0 1151 117 0 0 20 0 5 0 1485572 2188767232 123213 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 268444224 4096 16451 0 0 0 17 1 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
task 10442
comm qemu-system-x86
stat 10442 (qemu-system-x86) R 1 10441 10441 0 -1 138412416 7885 0 3 0 5 12 0 0 20 0 5 0 1485572 2188767232 123213 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 268444224 4096 16451 0 0 0 17 0 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 5420 233
task 10446
comm qemu-system-x86
stat 10446 (qemu-system-x86) S 1 10441 10441 0 -1 4194368 2 0 0 0 0 0 0 0 20 0 5 0 1485578 2188767232 123213 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 0 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 134 0
task 10447
comm worker
stat 10447 (worker) S 1 10441 10441 0 -1 138412224 29 0 0 0 0 0 0 0 20 0 5 0 1485578 2188767232 123213 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 34 10
task 10449
comm IO mon_iothread
stat 10449 (IO mon_iothread) S 1 10441 10441 0 -1 138412224 11 0 0 0 3 16 0 0 20 0 5 0 1485578 2188767232 123213 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 1 0 0 -1 0 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 698 26
task 10450
comm CPU 0/TCG
stat 10450 (CPU 0/TCG) R 1 10441 10441 0 -1 138412224 10085 0 8 0 1135 93 0 0 20 0 5 0 1485578 2188767232 123213 18446744073709551615 94248472244224 94248478104661 140735769291808 0 0 0 2147220087 4096 16451 0 0 0 -1 0 0 0 0 0 0 94248481216760 94248486420912 94248982716416 140735769297311 140735769300481 140735769300481 140735769300956 0
ctxt 396 357
cgroup 0::/machine/qemu-43-vmbench-r18396f46-1.libvirt-qemu/emulator
cgroup_cpu /sys/fs/cgroup/unified/machine/qemu-43-vmbench-r18396f46-1.libvirt-qemu
cpustat usage_usec 12693804
cpustat user_usec 11521584
cpustat system_usec 1172219
.
"""

RCU_0 = """\
@qemu-cpu 1
pid 11457
time 1795514565.598500792
clk_tck 100
host cpu  1671348 18 336603 887958 44235 0 19443 3314 2 0
proc 11457 (qemu-system-x86) S 1 11455 11455 0 -1 138412416 45047 0 6 0 3104 327 0 0 20 0 9 0 1492431 2444632064 226691 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 268444224 4096 16451 0 0 0 17 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
task 11457
comm qemu-system-x86
stat 11457 (qemu-system-x86) S 1 11455 11455 0 -1 138412416 8010 0 6 0 29 58 0 0 20 0 9 0 1492431 2444632064 226691 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 268444224 4096 16451 1 0 0 17 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 30123 1215
task 11473
comm call_rcu
stat 11473 (call_rcu) S 1 11455 11455 0 -1 4194368 2 0 0 0 1 0 0 0 20 0 9 0 1492436 2444632064 226691 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 152 8
task 11476
comm worker
stat 11476 (worker) S 1 11455 11455 0 -1 138412224 124 0 0 0 0 0 0 0 20 0 9 0 1492436 2444632064 226691 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 389 103
task 11481
comm IO mon_iothread
stat 11481 (IO mon_iothread) S 1 11455 11455 0 -1 138412224 14 0 0 0 3 15 0 0 20 0 9 0 1492437 2444632064 226691 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 0 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 175 653
task 11482
comm CPU 0/TCG
stat 11482 (CPU 0/TCG) R 1 11455 11455 0 -1 138412224 36728 0 0 0 3050 266 0 0 20 0 9 0 1492437 2444632064 226691 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 0 0 0 -1 0 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 1481 33238
task 12150
comm worker
stat 12150 (worker) S 1 11455 11455 0 -1 138412224 66 0 0 0 0 1 0 0 20 0 9 0 1494554 2444632064 226691 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 296 71
task 12151
comm worker
stat 12151 (worker) S 1 11455 11455 0 -1 138412224 34 0 0 0 1 0 0 0 20 0 9 0 1494563 2444632064 226691 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 295 72
task 12152
comm worker
stat 12152 (worker) S 1 11455 11455 0 -1 138412224 19 0 0 0 0 0 0 0 20 0 9 0 1494563 2444632064 226691 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 282 72
task 12153
comm worker
stat 12153 (worker) S 1 11455 11455 0 -1 138412224 32 0 0 0 0 0 0 0 20 0 9 0 1494563 2444632064 226691 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 299 82
cgroup 0::/machine/qemu-45-vmbench-r18396f46-4.libvirt-qemu/emulator
cgroup_cpu /sys/fs/cgroup/unified/machine/qemu-45-vmbench-r18396f46-4.libvirt-qemu
cpustat usage_usec 34325986
cpustat user_usec 31049536
cpustat system_usec 3276449
.
"""

RCU_1 = """\
@qemu-cpu 1
pid 11457
time 1795514568.615806882
clk_tck 100
host cpu  1671830 18 336666 888011 44235 0 19444 3314 2 0
proc 11457 (qemu-system-x86) S 1 11455 11455 0 -1 138412416 46113 0 6 0 3257 340 0 0 20 0 9 0 1492431 2444632064 240023 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 268444224 4096 16451 0 0 0 17 0 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
task 11457
comm qemu-system-x86
stat 11457 (qemu-system-x86) R 1 11455 11455 0 -1 138412416 8010 0 6 0 33 62 0 0 20 0 9 0 1492431 2444632064 240023 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 268444224 4096 16451 0 0 0 17 0 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 31916 1301
task 11473
comm call_rcu
stat 11473 (call_rcu) S 1 11455 11455 0 -1 4194368 2 0 0 0 1 0 0 0 20 0 9 0 1492436 2444632064 240023 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 152 8
task 11476
comm worker
stat 11476 (worker) S 1 11455 11455 0 -1 138412224 124 0 0 0 0 0 0 0 20 0 9 0 1492436 2444632064 240023 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 395 106
task 11481
comm IO mon_iothread
stat 11481 (IO mon_iothread) S 1 11455 11455 0 -1 138412224 14 0 0 0 3 15 0 0 20 0 9 0 1492437 2444632064 240023 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 0 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 175 653
task 11482
comm CPU 0/TCG
stat 11482 (CPU 0/TCG) R 1 11455 11455 0 -1 138412224 37794 0 0 0 3195 278 0 0 20 0 9 0 1492437 2444632064 240023 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 0 0 0 -1 0 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 1790 35023
task 12150
comm worker
stat 12150 (worker) S 1 11455 11455 0 -1 138412224 66 0 0 0 0 1 0 0 20 0 9 0 1494554 2444632064 240023 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 304 72
task 12151
comm worker
stat 12151 (worker) S 1 11455 11455 0 -1 138412224 34 0 0 0 1 0 0 0 20 0 9 0 1494563 2444632064 240023 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 304 74
task 12152
comm worker
stat 12152 (worker) S 1 11455 11455 0 -1 138412224 19 0 0 0 0 0 0 0 20 0 9 0 1494563 2444632064 240023 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 287 74
task 12153
comm worker
stat 12153 (worker) S 1 11455 11455 0 -1 138412224 32 0 0 0 0 0 0 0 20 0 9 0 1494563 2444632064 240023 18446744073709551615 93839378341888 93839384202325 140723699456336 0 0 0 2147220087 4096 16451 1 0 0 -1 1 0 0 0 0 0 93839387314424 93839392518576 93839530872832 140723699462559 140723699465729 140723699465729 140723699466204 0
ctxt 308 83
cgroup 0::/machine/qemu-45-vmbench-r18396f46-4.libvirt-qemu/emulator
cgroup_cpu /sys/fs/cgroup/unified/machine/qemu-45-vmbench-r18396f46-4.libvirt-qemu
cpustat usage_usec 35983495
cpustat user_usec 32577117
cpustat system_usec 3406377
.
"""


def snap(text: str) -> q.QemuSnapshot:
    return q.parse_snapshot(text)


def edit_thread(text: str, tid: int, *, comm: str | None = None, add_utime: int = 0) -> str:
    """``text`` with thread ``tid`` renamed and/or ``add_utime`` ticks more (in the thread's stat
    and in the process's, so the process total stays consistent): constructed data, not captured."""
    out, current = [], None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "task":
            current = int(value)
        elif key in ("proc", "stat") and add_utime:
            if key == "proc" or current == tid:
                head, rest = line[:line.rfind(")") + 1], line[line.rfind(")") + 1:].split()
                rest[11] = str(int(rest[11]) + add_utime)
                line = head + " " + " ".join(rest)
        if current == tid and comm is not None:
            if key == "comm":
                line = f"comm {comm}"
            elif key == "stat":
                line = line[:line.find(" (") + 2] + comm + line[line.rfind(")"):]
        out.append(line)
    return "\n".join(out) + "\n"


def drop_thread(text: str, tid: int) -> str:
    out, skip = [], False
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "task":
            skip = int(value) == tid
        elif key not in ("comm", "stat", "ctxt"):
            skip = False
        if not skip:
            out.append(line)
    return "\n".join(out) + "\n"


def test_snapshot_argv_is_the_constant_script_with_the_pid():
    assert q.snapshot_argv(2194) == ["sh", "-c", q.SNAPSHOT_SCRIPT, "sh", "2194"]
    for bad in (0, -1, True, "12"):
        with pytest.raises(ValueError, match="not a process id"):
            q.snapshot_argv(bad)


def test_the_script_reads_a_live_process_here():
    """Run read-only on this test's own process: one snapshot, parsed; then on no process."""
    argv = q.snapshot_argv(os.getpid())
    got = snap(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    assert got.pid == os.getpid() and got.clk_tck == int(os.sysconf("SC_CLK_TCK"))
    assert os.getpid() in {t.tid for t in got.threads} and len(got.host) == len(q.HOST_FIELDS)
    assert got.utime >= next(t.utime for t in got.threads if t.tid == os.getpid())
    done = subprocess.run(q.snapshot_argv(2 ** 22 + 7), capture_output=True, text=True)
    assert done.returncode == 3 and "no process" in done.stderr and done.stdout == ""


def test_parse_a_real_tcg_snapshot():
    s = snap(TCG_1)
    assert (s.pid, s.comm, s.clk_tck, s.time_s) == (10442, "qemu-system-x86", 100, 1795514447.8807309)
    assert s.host == (1659168, 18, 333386, 880338, 44203, 0, 19250, 3308)
    assert s.host_busy == 1659168 + 18 + 333386 + 0 + 19250 + 3308
    assert (s.utime, s.stime, s.children, s.starttime) == (757, 108, 0, 1485572)
    assert [(t.tid, t.comm) for t in s.threads] == [
        (10442, "qemu-system-x86"), (10446, "qemu-system-x86"), (10447, "worker"), (10448, "worker"),
        (10449, "IO mon_iothread"), (10450, "CPU 0/TCG")]
    vcpu = s.threads[-1]
    assert (vcpu.utime, vcpu.stime, vcpu.starttime, vcpu.voluntary, vcpu.involuntary) == (746, 85, 1485578, 283, 269)
    assert s.cgroups[-1] == "0::/machine/qemu-43-vmbench-r18396f46-1.libvirt-qemu/emulator"
    # libvirt puts QEMU's main thread in .../emulator; the cgroup read is the VM's scope above it
    assert s.cgroup_cpu == q.CgroupCpu("/sys/fs/cgroup/unified/machine/qemu-43-vmbench-r18396f46-1.libvirt-qemu",
                                       8.669228, 7.587614, 1.081614)


@pytest.mark.parametrize("comm", ["CPU 0/KVM", "a) (b", "x) S 1 2 3", "IO iothread1", "(", ")", " ", "a)"])
def test_comm_with_spaces_and_parentheses(comm):
    """/proc/*/stat puts the comm in parentheses without escaping: parse from the LAST ')'."""
    s = snap(edit_thread(TCG_1, 10450, comm=comm))
    t = next(t for t in s.threads if t.tid == 10450)
    assert t.comm == comm and (t.utime, t.stime, t.starttime) == (746, 85, 1485578)
    pid, got, rest = q.parse_stat(f"10450 ({comm}) R 1 10441 10441 0 -1 138412224 6812 0 8 0 746 85 0 0 20 0 6 0 1485578 2")
    assert (pid, got, rest[11], rest[12], rest[19]) == (10450, comm, "746", "85", "1485578")


def test_process_comm_with_a_parenthesis_is_read_from_the_last_one():
    text = TCG_1.replace("proc 10442 (qemu-system-x86) S", "proc 10442 (q) R (x) S")
    s = snap(text)
    assert s.comm == "q) R (x" and (s.utime, s.stime) == (757, 108)


@pytest.mark.parametrize("text, why", [
    ("", "not a QEMU CPU snapshot"),
    ("pid 1\n.\n", "not a QEMU CPU snapshot"),
    (TCG_1.rsplit(".", 1)[0], "cut short"),
    (TCG_1.replace("clk_tck 100\n", ""), "'clk_tck'"),
    ("".join(line + "\n" for line in TCG_1.splitlines() if not line.startswith("proc ")), "'proc'"),
    (TCG_1.replace("host cpu  ", "host xyz "), "bad pid, time, clk_tck or host"),
    (TCG_1.replace("ctxt 283 269", "ctxt 283"), "bad thread '10450'"),
    (TCG_1.replace("stat 10450 (CPU 0/TCG) R", "stat 10450 CPU 0/TCG R"), "not a /proc stat line"),
])
def test_unreadable_snapshots_raise_snapshot_error(text, why):
    with pytest.raises(q.SnapshotError, match=why):
        snap(text)


def test_a_thread_cut_short_by_its_exit_is_left_out():
    """The script skips a thread whose files vanish; a record without its stat is ignored."""
    text = "".join(line + "\n" for line in TCG_1.splitlines() if not line.startswith("stat 10448 "))
    assert [t.tid for t in snap(text).threads] == [10442, 10446, 10447, 10449, 10450]


def test_no_cgroup_v2_cpu_stat():
    text = "".join(line + "\n" for line in TCG_1.splitlines() if not line.startswith(("cgroup_cpu", "cpustat")))
    assert snap(text).cgroup_cpu is None and len(snap(text).cgroups) == 1


@pytest.mark.parametrize("comm, main, is_main, cls", [
    ("CPU 0/KVM", "qemu-system-x86", None, C.VCPU),  # system/cpus.c "CPU %d/%s", the accelerator's name
    ("CPU 15/KVM", "kvm", False, C.VCPU),
    ("CPU 0/TCG", "qemu-system-x86", False, C.VCPU),  # MTTCG: one thread per vCPU
    ("ALL CPUs/TCG", "qemu-system-x86", False, C.VCPU),  # round-robin TCG (tcg-accel-ops-rr.c)
    ("CPU 1/HVF", "qemu-system-aar", False, C.VCPU),
    ("IO iothread1", "qemu-system-x86", False, C.IOTHREAD),  # iothread.c "IO %s", the object's id
    ("IO iothread-vir", "kvm", False, C.IOTHREAD),  # cut to 15 characters by the kernel
    ("IO mon_iothread", "qemu-system-x86", False, C.OTHER),  # QEMU's monitor, in every VM
    ("worker", "qemu-system-x86", False, C.WORKER),  # util/thread-pool.c, aio=threads
    ("iou-wrk-10450", "qemu-system-x86", False, C.WORKER),  # io_uring's kernel workers
    ("iou-sqp-10442", "qemu-system-x86", False, C.WORKER),
    ("qemu-system-x86", "qemu-system-x86", True, C.MAIN),  # tid == pid
    ("kvm", "kvm", True, C.MAIN),  # Proxmox's /usr/bin/kvm
    ("qemu-system-x86", "qemu-system-x86", None, C.MAIN),  # by the name alone
    ("qemu-system-x86", "qemu-system-x86", False, C.OTHER),  # call_rcu, created before naming
    ("call_rcu", "qemu-system-x86", False, C.OTHER),
    ("vnc_worker", "qemu-system-x86", False, C.OTHER),
    ("SPICE Worker", "qemu-system-x86", False, C.OTHER),
    ("threaded-ml", "qemu-system-x86", False, C.OTHER),
    ("vhost-10442", "qemu-system-x86", False, C.OTHER),
    ("CPU0/KVM", "qemu-system-x86", False, C.OTHER),
    ("workers", "qemu-system-x86", False, C.OTHER),
])
def test_classify_by_qemus_thread_names(comm, main, is_main, cls):
    assert q.classify(comm, main, is_main=is_main) is cls


def test_accelerator_and_class_names():
    assert [q.accelerator(n) for n in ("CPU 0/KVM", "ALL CPUs/TCG", "worker")] == ["KVM", "TCG", None]
    assert C.parse("iothread") is C.IOTHREAD
    with pytest.raises(ValueError, match="unknown thread class 'io'.*vcpu, iothread, main, worker, other, exited"):
        C.parse("io")


def test_account_real_snapshots_adds_up_with_exited():
    got = q.account(snap(TCG_1), snap(TCG_2), ios=1000)
    assert got.elapsed_s == pytest.approx(4.010549044)
    assert (got.process_user_s, got.process_system_s) == pytest.approx((3.94, 0.09))  # 394 and 9 ticks
    k = got.classes
    assert (k[C.VCPU].threads, k[C.VCPU].user_s, k[C.VCPU].system_s) == (1, pytest.approx(3.89), pytest.approx(0.08))
    assert (k[C.MAIN].user_s, k[C.MAIN].system_s) == pytest.approx((0.01, 0.04))
    assert (k[C.WORKER].threads, k[C.WORKER].cpu_s, k[C.IOTHREAD].threads, k[C.IOTHREAD].cpu_s) == (1, 0, 0, 0)
    assert (k[C.OTHER].threads, k[C.OTHER].cpu_s) == (2, 0)  # the unnamed call_rcu and the monitor's iothread
    # worker 10448 exited: it is EXITED, with the process's time the threads alive do not hold
    ex = k[C.EXITED]
    assert (ex.threads, ex.voluntary, ex.involuntary) == (1, None, None)
    assert ex.cpu_s == pytest.approx(0.01)  # 403 ticks for the process, 402 in the threads alive
    assert sum(c.cpu_s for c in k.values()) == pytest.approx(got.process_s, abs=1e-12)
    assert sum(c.user_s for c in k.values()) == pytest.approx(got.process_user_s, abs=1e-12)
    assert got.threads_sum_s == pytest.approx(4.02) and got.accounted_share == pytest.approx(402 / 403)
    assert abs(got.accounted_share - 1) < 0.05
    assert got.accel == "TCG" and not any(t.new for t in got.threads)


def test_a_gone_threads_time_is_exited_and_lowers_the_accounted_share():
    """Constructed: worker 11476 dropped from RCU_1 as if it had exited, with 5 user ticks more in
    RCU_1's process total than in its threads' (the time it used before exiting)."""
    after = drop_thread(edit_thread(RCU_1, 11476, add_utime=5), 11476)
    got = q.account(snap(RCU_0), snap(after), ios=10)
    ex = got.classes[C.EXITED]
    assert ex.threads == 1 and ex.cpu_s == pytest.approx(0.06)  # its 5 ticks and the 1-tick rounding
    assert got.classes[C.WORKER].threads == 4
    assert sum(c.cpu_s for c in got.classes.values()) == pytest.approx(got.process_s, abs=1e-12)
    assert got.accounted_share == pytest.approx(165 / 171)


def test_exited_split_may_dip_below_zero_but_its_total_does_not_lie():
    """The kernel splits user/system for the process and per thread separately: with no thread
    gone, EXITED holds the rounding, user +4 ticks and system -3 here (real snapshots)."""
    got = q.account(snap(RCU_0), snap(RCU_1), ios=0)
    ex = got.classes[C.EXITED]
    assert ex.threads == 0 and (ex.user_s, ex.system_s) == pytest.approx((0.04, -0.03))
    assert got.accounted_share == pytest.approx(165 / 166)


def test_context_switches_per_io():
    got = q.account(snap(TCG_1), snap(TCG_2), ios=2000)
    k = got.classes
    assert (k[C.MAIN].voluntary, k[C.MAIN].involuntary) == (2200, 13)
    assert (k[C.VCPU].voluntary, k[C.VCPU].involuntary) == (113, 88)
    assert (k[C.WORKER].voluntary, k[C.WORKER].involuntary, k[C.OTHER].voluntary) == (26, 8, 45)
    row = got.to_json()["classes"]
    assert row["main"]["switches_per_io"] == pytest.approx(2213 / 2000)
    assert row["vcpu"]["us_per_io"] == pytest.approx(3.97e6 / 2000)
    assert row["exited"]["switches_per_io"] is None
    workers = q.account(snap(RCU_0), snap(RCU_1), ios=100).classes[C.WORKER]
    assert (workers.threads, workers.voluntary, workers.involuntary) == (5, 37, 9)


def test_host_rest_and_cgroup():
    got = q.account(snap(TCG_1), snap(TCG_2), ios=1000)
    assert got.host_busy_s == pytest.approx(4.15)  # user +397, system +18 jiffies
    assert got.host_rest_s == pytest.approx(0.12)
    row = got.to_json()
    assert row["host"]["rest_us_per_io"] == pytest.approx(120.0)
    cg = got.cgroup
    assert cg is not None and cg.path.endswith("qemu-43-vmbench-r18396f46-1.libvirt-qemu")
    assert (cg.usage_s, cg.user_s, cg.system_s) == pytest.approx((4.024576, 3.93397, 0.090605))
    assert row["cgroup"]["us_per_io"] == pytest.approx(4024.576)
    other = q.account(snap(TCG_1), snap(TCG_2.replace("qemu-43-", "qemu-99-")), ios=1)
    assert other.cgroup is None and other.to_json()["cgroup"] is None  # another cgroup: no delta


def test_a_new_thread_counts_from_zero_and_a_reused_tid_is_new():
    after = TCG_2.replace(".\n", "").rstrip("\n").split("\ncgroup ", 1)
    extra = ("task 10460\ncomm worker\nstat 10460 (worker) S 1 10441 10441 0 -1 138412224 3 0 0 0 2 1 0 0 20 0 6 0 "
             "1486000 0\nctxt 5 1\n")
    text = after[0] + "\n" + extra + "cgroup " + after[1] + "\n.\n"
    got = q.account(snap(TCG_1), snap(text), ios=10)
    new = next(t for t in got.threads if t.tid == 10460)
    assert new.new and (new.user_s, new.system_s, new.voluntary, new.involuntary) == pytest.approx((0.02, 0.01, 5, 1))
    # the same tid with another start time is another thread: counted from 0, not as a delta
    reused = "".join((line.replace(" 1485578 ", " 1485999 ") if line.startswith("stat 10447 ") else line) + "\n"
                     for line in TCG_2.splitlines())
    t = next(t for t in q.account(snap(TCG_1), snap(reused), ios=1).threads if t.tid == 10447)
    assert reused != TCG_2 and t.new and (t.voluntary, t.involuntary) == (34, 10)  # its whole count, from 0


def test_iothread_share_is_zero_without_and_non_zero_with_one():
    """No guest here had an iothread: constructed by renaming worker 11476 to "IO iothread1" in
    copies of RCU_0/RCU_1 and giving it 7 more user ticks in RCU_1 (and the process too)."""
    plain = q.account(snap(RCU_0), snap(RCU_1), ios=500)
    assert plain.classes[C.IOTHREAD].threads == 0 and plain.classes[C.IOTHREAD].cpu_s == 0
    before = edit_thread(RCU_0, 11476, comm="IO iothread1")
    after = edit_thread(edit_thread(RCU_1, 11476, comm="IO iothread1"), 11476, add_utime=7)
    got = q.account(snap(before), snap(after), ios=500)
    io = got.classes[C.IOTHREAD]
    assert (io.threads, io.user_s, io.voluntary, io.involuntary) == (1, pytest.approx(0.07), 6, 3)
    assert got.to_json()["classes"]["iothread"]["us_per_io"] == pytest.approx(140.0)
    assert got.classes[C.WORKER].threads == 4
    assert sum(c.cpu_s for c in got.classes.values()) == pytest.approx(got.process_s, abs=1e-12)


def test_idle_rate_is_subtracted_and_stated():
    idle = q.idle_rate(snap(TCG_0), snap(TCG_1))
    e = idle.elapsed_s
    assert e == pytest.approx(4.014081)
    assert idle.classes[C.VCPU] == q.ClassRate(pytest.approx(3.54 / e), pytest.approx(0.46 / e), 84 / e, 174 / e)
    assert idle.classes[C.MAIN].voluntary_per_s == pytest.approx(1996 / e)
    assert idle.host_rest_per_s == pytest.approx(0.11 / e) and idle.cgroup_per_s == pytest.approx(4.051268 / e)
    got = q.account(snap(TCG_1), snap(TCG_2), ios=1000, idle=idle)
    k, scale = got.classes, got.elapsed_s / e
    assert k[C.VCPU].idle_user_s == pytest.approx(3.54 * scale) and k[C.VCPU].idle_system_s == pytest.approx(0.08)
    assert k[C.VCPU].net_cpu_s == pytest.approx(3.89 + 0.08 - 3.54 * scale - 0.08)  # system capped at what was there
    assert k[C.MAIN].idle_voluntary == pytest.approx(1996 * scale)
    assert k[C.MAIN].idle_involuntary == 0  # idle rate 0
    assert k[C.EXITED].idle_system_s == 0  # never more than is there, never below 0
    assert all(c.net_cpu_s >= 0 for c in k.values()) and k[C.EXITED].net_cpu_s == 0  # EXITED: user +4, system -3 ticks
    row = got.to_json()
    assert row["idle"]["elapsed_s"] == pytest.approx(e) and row["idle"]["classes"]["vcpu"]["user_per_s"] == pytest.approx(3.54 / e)
    assert row["process"]["idle_s"] == pytest.approx(sum(c.idle_user_s + c.idle_system_s for c in k.values()))
    assert row["host"]["idle_rest_s"] == pytest.approx(0.11 * scale)
    assert row["cgroup"]["idle_s"] == pytest.approx(4.024576)  # the idle rate was higher: capped
    assert row["classes"]["vcpu"]["us_per_io"] == pytest.approx(k[C.VCPU].net_cpu_s * 1000)
    # the raw figures still add up to the process total
    assert sum(c.cpu_s for c in k.values()) == pytest.approx(got.process_s, abs=1e-12)


def test_guest_cpu_and_no_ios():
    got = q.account(snap(TCG_1), snap(TCG_2), ios=400, guest_busy_s=1.2)
    assert got.to_json()["guest"] == {"busy_s": 1.2, "us_per_io": pytest.approx(3000.0)}
    row = q.account(snap(TCG_1), snap(TCG_2), ios=0).to_json()
    assert row["process"]["us_per_io"] is None and row["classes"]["vcpu"]["us_per_io"] is None and row["guest"] is None


def test_snapshots_of_two_processes_or_out_of_order_are_refused():
    with pytest.raises(q.SnapshotError, match="different processes"):
        q.account(snap(TCG_1), snap(RCU_1), ios=1)
    with pytest.raises(q.SnapshotError, match="out of order"):
        q.account(snap(TCG_2), snap(TCG_1), ios=1)


def test_json_row_round_trips():
    idle = q.idle_rate(snap(TCG_0), snap(TCG_1))
    got = q.account(snap(TCG_1), snap(TCG_2), ios=1000, idle=idle, guest_busy_s=0.5)
    row = json.loads(json.dumps(got.to_json()))
    assert row["kind"] == "qemu-cpu" and row["format"] == 1 and row["accel"] == "TCG" and row["named"]
    assert list(row["classes"]) == ["vcpu", "iothread", "main", "worker", "other", "exited"]
    assert set(row["classes"]["vcpu"]) == {
        "threads", "user_s", "system_s", "cpu_s", "voluntary", "involuntary", "idle_user_s", "idle_system_s",
        "idle_voluntary", "idle_involuntary", "net_cpu_s", "us_per_io", "switches_per_io"}
    assert row["threads"][0] == {"tid": 10442, "comm": "qemu-system-x86", "class": "main", "user_s": 0.01,
                                 "system_s": 0.04, "voluntary": 2200, "involuntary": 13, "new": False}
    back = q.CpuPerIo.from_json(row)
    assert back == got and back.to_json() == row
    plain = q.account(snap(RCU_0), snap(RCU_1), ios=3)
    assert q.CpuPerIo.from_json(json.loads(json.dumps(plain.to_json()))) == plain
    with pytest.raises(ValueError, match="not a qemu-cpu row"):
        q.CpuPerIo.from_json({"kind": "cpu"})


def test_unnamed_threads_are_stated():
    """Without -name debug-threads=on every thread keeps the process's name: no vCPU is found."""
    text = TCG_1
    for name in ("CPU 0/TCG", "IO mon_iothread", "worker"):
        text = text.replace(f"comm {name}\n", "comm qemu-system-x86\n").replace(f"({name})", "(qemu-system-x86)")
    got = q.account(snap(text), snap(text.replace("time 1795514447.", "time 1795514448.")), ios=1)
    assert got.accel is None and got.to_json()["named"] is False
    assert [t.cls for t in got.threads] == [C.MAIN] + [C.OTHER] * 5
