# Gantt chart of one ddlsim run's tasks.csv: one row per resource, one bar per task, coloured by kind.
# Usage: gnuplot -e "dir='out/quickstart'" scripts/timeline.gp   -> dir/timeline.png
if (!exists("dir")) dir = "out/quickstart"
set terminal pngcairo size 1400,420 font "sans,11"
set output dir."/timeline.png"
set datafile separator ","
set termoption noenhanced
set title "ddlsim: one training iteration, worker 0 (".dir.")"
set xlabel "time (ms)"
set ytics ("host CPU" 1, "GPU compute" 2, "communication" 3, "waits" 4)
set yrange [0.4:4.6]
set grid xtics
set key outside right top
row(r) = r eq "host_cpu" ? 1 : r eq "gpu_compute" ? 2 : r eq "comm" ? 3 : 4
bar(k, want) = (k eq want) ? 1 : NaN
kinds = "data_load h2d forward backward update communication delay"
colors = "#888888 #b07aa1 #4e79a7 #f28e2b #59a14f #e15759 #bab0ac"
plot for [i=1:words(kinds)] dir."/tasks.csv" every ::1 \
     using ($7*1000):(row(strcol(2))*bar(strcol(3), word(kinds, i))):(($8-$7)*1000):(0) \
     with vectors nohead lw 18 lc rgb word(colors, i) title word(kinds, i)
