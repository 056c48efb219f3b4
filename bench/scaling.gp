# bench/scaling.gp — the scaling curves of bench/RESULTS.md (called by bench/run.sh):
#   gnuplot -e "w3='w3.dat'; w4='w4.dat'; out='scaling.png'; term='pngcairo'" bench/scaling.gp
# w3.dat: nodes  pg_sched_p50_ms  pg_sched_10x_others_p50_ms  sql_p50_ms   (median of runs)
# w4.dat: pending_requests  pg_sched_dispatches_per_s  plain_claims_per_s
# A value "NaN" is not drawn.
if (!exists("term")) term = 'pngcairo'
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
plot w3 using 1:2 with linespoints lw 2 pt 7 title 'pg\_sched', \
     w3 using 1:3 with linespoints lw 2 pt 5 title 'pg\_sched, + 10x nodes of other capabilities', \
     w3 using 1:4 with linespoints lw 2 pt 9 dt 2 title 'SQL baseline'

set title 'Workload 4: dispatch\_next throughput vs queue size (1 client)'
set logscale x
set logscale y
set xlabel 'pending requests'
set ylabel 'per second'
plot w4 using 1:2 with linespoints lw 2 pt 7 title 'pg\_sched dispatch\_next(100): placements/s', \
     w4 using 1:3 with linespoints lw 2 pt 9 dt 2 title 'plain queue claim(100): claims/s'
unset multiplot
