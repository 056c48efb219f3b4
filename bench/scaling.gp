# bench/scaling.gp — the scaling curves of bench/RESULTS.md (called by bench/run.sh):
#   gnuplot -e "w3='w3.dat'; w4='w4.dat'; has3=1; has4=1; out='scaling.png'; term='pngcairo'" bench/scaling.gp
# w3.dat: nodes  pg_sched_p50_ms  pg_sched_10x_others_p50_ms  sql_p50_ms   (median of runs)
# w4.dat: pending_requests  pg_sched_dispatches_per_s  plain_claims_per_s
# A value "NaN" is not drawn; has3 / has4 = 0 leave a panel empty (workload not run).
if (!exists("term")) term = 'pngcairo'
if (!exists("has3")) has3 = 1
if (!exists("has4")) has4 = 1
if (term eq 'pngcairo') {
    set terminal pngcairo size 1400,560 font ',10'
} else {
    set terminal png size 1400,560
}
set output out
set datafile missing 'NaN'
set multiplot layout 1,2 title 'pg\_sched scaling (medians)'

set title 'Workload 3: select\_candidate p50 latency vs nodes serving the capability'
set logscale xy
set xlabel 'nodes serving the requested capability'
set ylabel 'p50 latency (ms)'
set format x '10^{%L}'
set key top left
set grid
if (!has3) { set label 1 'workload 3 not run' at graph 0.5, 0.5 center; plot [1:10] [1:10] NaN notitle; unset label 1 } else {
plot w3 using 1:2 with linespoints lw 2 pt 7 title 'pg\_sched', \
     w3 using 1:3 with linespoints lw 2 pt 5 title 'pg\_sched, + 10x nodes of other capabilities', \
     w3 using 1:4 with linespoints lw 2 pt 9 dt 2 title 'SQL baseline'
}

set title 'Workload 4: dispatch\_next throughput vs queue size (1 client)'
set logscale x
set logscale y
set xlabel 'pending requests'
set ylabel 'per second'
if (!has4) { set label 1 'workload 4 not run' at graph 0.5, 0.5 center; plot [1:10] [1:10] NaN notitle; unset label 1 } else {
plot w4 using 1:2 with linespoints lw 2 pt 7 title 'pg\_sched dispatch\_next(100): placements/s', \
     w4 using 1:3 with linespoints lw 2 pt 9 dt 2 title 'plain queue claim(100): claims/s'
}
unset multiplot
