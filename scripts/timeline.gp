# Gantt chart of one ddlsim run's tasks.csv: one row per device and stream that ran something (each GPU its own
# rows, in rank order, then the hosts), one bar per task, coloured by kind.
# Usage: gnuplot -e "dir='out/quickstart'" scripts/timeline.gp   -> dir/timeline.png
if (!exists("dir")) dir = "out/quickstart"
csv = dir."/tasks.csv"
set datafile separator ","

# A row's slot: device d (gpu<k>: k; host<k>: after the last GPU) times the streams, plus the stream.
streams = "host_cpu gpu_compute gpu_compression comm comm_pull p2p host_thread none"
names = "host-CPU compute compression comm pull p2p launch waits"
stream(r) = sum [i = 1:words(streams)] (word(streams, i) eq r ? i : 0)
gpu(d) = d[1:3] eq "gpu" ? int(d[4:*]) : -1
stats csv every ::1 using (gpu(strcol(1))) name "G" nooutput
last_gpu = int(G_max)
device(d) = d[1:3] eq "gpu" ? int(d[4:*]) : last_gpu + 1 + int(d[5:*])
slot(d, r) = device(d) * words(streams) + stream(r)
stats csv every ::1 using (device(strcol(1))) name "D" nooutput
slots = (int(D_max) + 1) * words(streams)

# The slots that ran something, numbered from the top in slot order; row_names lists them ("gpu0 compute|...").
array used[slots]
array row_of[slots]
do for [k = 1:slots] { used[k] = 0 }
mark(k) = (used[k] = 1, 0)
stats csv every ::1 using (mark(slot(strcol(1), strcol(2)))) nooutput
rows = 0
row_names = ""
set ytics () scale 0
do for [k = 1:slots] {
  if (used[k]) {
    rows = rows + 1
    row_of[k] = rows
    d = (k - 1) / words(streams)
    label = (d <= last_gpu ? sprintf("gpu%d", d) : sprintf("host%d", d - last_gpu - 1)) . " " \
            . word(names, (k - 1) % words(streams) + 1)
    row_names = row_names . (rows > 1 ? "|" : "") . label
    set ytics add (label rows)
  }
}

set terminal pngcairo size 1400, 120 + 26 * rows font "sans,11" noenhanced
set output dir."/timeline.png"
set title "ddlsim: one training iteration (".dir.")"
set xlabel "time (ms)"
set yrange [rows + 0.6:0.4]
set grid xtics
set key outside right top
bar(k, want) = (k eq want) ? 1 : NaN
kinds = "data_load h2d forward backward update communication compression prediction launch delay"
colors = "#888888 #b07aa1 #4e79a7 #f28e2b #59a14f #e15759 #76b7b2 #edc948 #ff9da7 #bab0ac"
set style fill solid noborder
plot for [i = 1:words(kinds)] csv every ::1 \
     using (($7+$8)*500):(row_of[slot(strcol(1), strcol(2))]*bar(strcol(3), word(kinds, i))):(($8-$7)*500):(0.35) \
     with boxxyerror lc rgb word(colors, i) title word(kinds, i)
