// sim plots: results.csv parsing (RFC 4180, errors naming file and line), custom plots and the standard sweep plots
// drawn by the real gnuplot. Images are checked structurally: PNG signature and IHDR size, SVG root element; the
// .dat and .gp beside them must be byte-identical for the same table and must redraw the image on their own.
#include "sim/report/plot.hpp"

#include "core/error.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp directory, removed with everything in it.
class TempDir {
public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ddlsim-plot-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }
  [[nodiscard]] std::string operator/(const std::string& name) const { return (path_ / name).string(); }

private:
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.insert(e.path().filename().string());
  return names;
}

std::uint32_t big_endian(const std::string& bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i)
    v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// A PNG file: the 8-byte signature, then the IHDR chunk (length 13) whose first fields are width and height.
void require_png(const std::string& path, std::uint32_t width, std::uint32_t height) {
  INFO(path);
  const std::string png = read_bytes(path);
  REQUIRE(png.size() > 33);
  CHECK(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  CHECK(big_endian(png, 8) == 13);
  CHECK(png.substr(12, 4) == "IHDR");
  CHECK(big_endian(png, 16) == width);
  CHECK(big_endian(png, 20) == height);
}

void require_svg(const std::string& path) {
  INFO(path);
  std::string svg = read_bytes(path);
  while (!svg.empty() && std::isspace(static_cast<unsigned char>(svg.back())))
    svg.pop_back();
  const std::size_t start = svg.find_first_not_of(" \t\r\n");
  REQUIRE(start != std::string::npos);
  CHECK((svg.compare(start, 5, "<?xml") == 0 || svg.compare(start, 4, "<svg") == 0));
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.ends_with("</svg>"));
}

constexpr const char* kSummaryHeader =
    "scenario,engine,workers,iteration_time_s,throughput_samples_per_s,scaling_efficiency,breakdown_s.compute,"
    "breakdown_s.compression,breakdown_s.exposed_communication,breakdown_s.idle,communication_bytes_per_worker,"
    "peak_memory_bytes_per_gpu,sim.wall_s,sim.events,sim.flows,model,strategy,allreduce,compute_source,"
    "single_gpu_iteration_s,critical_path_s";

// The summary cells of one point of a synthetic sweep (batch 64 per GPU, 250 ms of compute unless told): the
// iteration is compute + exposed communication + 2 ms of idle, and the 1-GPU iteration is compute + idle.
std::string summary_cells(int workers, double exposed_s, const std::string& strategy, double compute_s = 0.25) {
  const double idle_s = 0.002, single_s = compute_s + idle_s;
  const double iteration_s = compute_s + exposed_s + idle_s;
  const double throughput = 64.0 * workers / iteration_s;
  const double efficiency = single_s / iteration_s;
  return fmt::format("resnet50-sweep,analytic,{},{},{},{},{},0,{},{},102228128,4000000000,0.01,100,0,resnet50,{},ring,"
                     "single_gpu_iteration,{},{}",
                     workers, iteration_s, throughput, efficiency, compute_s, exposed_s, idle_s, strategy, single_s,
                     compute_s);
}

// cluster.nodes in {1, 2, 4, 8, 16} (4 GPUs each) x strategy.kind in {wfbp, mg-wfbp}; point 3 failed.
std::string nodes_by_strategy_csv() {
  std::string csv = fmt::format("point,cluster.nodes,strategy.kind,status,{},error\n", kSummaryHeader);
  int point = 0;
  for (const int nodes : {1, 2, 4, 8, 16})
    for (const std::string strategy : {"wfbp", "mg-wfbp"}) {
      const double exposed_s = nodes == 1 ? 0.0 : (strategy == "wfbp" ? 0.012 : 0.008) * std::log2(nodes * 4.0);
      if (point == 3)
        csv += fmt::format("{},{},{},failed,{},\"boom, at \"\"allreduce\"\"\"\n", point, nodes, strategy,
                           std::string(20, ','));
      else
        csv += fmt::format("{},{},{},ok,{},\n", point, nodes, strategy, summary_cells(nodes * 4, exposed_s, strategy));
      ++point;
    }
  return csv;
}

// cluster.inter_node.bandwidth in {1, 10, 25, 100} Gbps on 8 nodes, and 2 nodes x 4 GPUs.
std::string bandwidth_csv() {
  std::string csv = fmt::format("point,cluster.inter_node.bandwidth,status,{},error\n", kSummaryHeader);
  int point = 0;
  for (const double gbps : {1.0, 10.0, 25.0, 100.0}) {
    csv += fmt::format("{},{} Gbps,ok,{},\n", point, gbps, summary_cells(32, 0.4 / gbps, "mg-wfbp"));
    ++point;
  }
  return csv;
}

// A table of the swept `keys` (one value per key and point), the summary from summary_cells.
struct Point {
  std::vector<std::string> values;
  int workers = 1;
  double exposed_s = 0;
  std::string strategy = "ddp";
  double compute_s = 0.25;
};
std::string table_csv(const std::vector<std::string>& keys, const std::vector<Point>& points) {
  std::string csv = "point";
  for (const auto& k : keys)
    csv += "," + k;
  csv += fmt::format(",status,{},error\n", kSummaryHeader);
  for (std::size_t i = 0; i < points.size(); ++i) {
    csv += std::to_string(i);
    for (const auto& v : points[i].values)
      csv += "," + v;
    csv += fmt::format(",ok,{},\n",
                       summary_cells(points[i].workers, points[i].exposed_s, points[i].strategy, points[i].compute_s));
  }
  return csv;
}

// The text of block `index` of a gnuplot data file, from its "# block" comment to the blank lines after it.
std::string block_of(const std::string& dat, int index) {
  const std::size_t start = dat.find(fmt::format("# block {}:", index));
  REQUIRE(start != std::string::npos);
  return dat.substr(start, dat.find("\n\n", start) - start);
}

} // namespace

TEST_CASE("sim::parse_results_csv reads RFC 4180 cells", "[plot][csv]") {
  SECTION("quoted cells keep commas, doubled quotes and newlines; CRLF line ends are accepted") {
    const std::string text = "point,strategy,status,error\r\n"
                             "0,\"{\"\"kind\"\":\"\"topk\"\",\"\"density\"\":0.01}\",ok,\r\n"
                             "1,wfbp,failed,\"line one\r\nline two, with a comma\"\r\n"
                             "\r\n"; // a trailing blank line is no row
    const auto t = parse_results_csv(text, "r.csv");
    CHECK(t.file == "r.csv");
    REQUIRE(t.columns == std::vector<std::string>{"point", "strategy", "status", "error"});
    REQUIRE(t.rows.size() == 2);
    CHECK(t.rows[0][1] == R"({"kind":"topk","density":0.01})");
    CHECK(t.rows[0][3].empty());
    CHECK(t.rows[1][3] == "line one\nline two, with a comma"); // CRLF inside the cell becomes LF
    CHECK(t.swept_keys() == std::vector<std::string>{"strategy"});
    CHECK(t.column("status") == 2);
    CHECK(t.column("nope") == -1);
  }
  SECTION("the swept keys are the columns between point and status") {
    const auto t = parse_results_csv(nodes_by_strategy_csv(), "r.csv");
    CHECK(t.swept_keys() == std::vector<std::string>{"cluster.nodes", "strategy.kind"});
    REQUIRE(t.rows.size() == 10);
    CHECK(t.rows[3][t.column("error")] == "boom, at \"allreduce\"");
    CHECK(t.rows[3][t.column("status")] == "failed");
  }
  SECTION("no newline at the end, a byte order mark at the start, and no swept key") {
    const auto t = parse_results_csv("\xEF\xBB\xBFpoint,status\n0,ok", "r.csv");
    CHECK(t.columns.front() == "point");
    CHECK(t.rows.size() == 1);
    CHECK(t.swept_keys().empty());
  }
}

TEST_CASE("sim::parse_results_csv names the file and line of malformed input", "[plot][csv]") {
  const auto [text, message] = GENERATE(table<std::string, std::string>({
      {"point,a,status\n0,1,ok\n1,2\n", "bad.csv: line 3: 2 cells, but the header has 3 columns"},
      {"point,a,status\n0,1,ok,extra\n", "bad.csv: line 2: 4 cells, but the header has 3 columns"},
      {"point,a,status\n0,\"1,ok\n1,2,ok\n",
       "bad.csv: line 2: unterminated quoted cell: the '\"' that opens it is never closed"},
      {"point,a,status\n0,\"1\"x,ok\n", "bad.csv: line 2: cell 2 has text after its closing quote"},
      {"point,a,status\n0,1\"2,ok\n", "bad.csv: line 2: cell 2 contains '\"' but does not start with one"},
      {"a,status\n0,ok\n", "bad.csv: line 1: no 'point' column in the header"},
      {"\npoint,a\n0,1\n", "bad.csv: line 2: no 'status' column in the header"},
      {"status,a,point\n", "bad.csv: line 1: the 'status' column comes before 'point'"},
      {"", "bad.csv: empty file"},
  }));
  CAPTURE(text);
  REQUIRE_THROWS_AS(parse_results_csv(text, "bad.csv"), InputError);
  REQUIRE_THROWS_WITH(parse_results_csv(text, "bad.csv"), Catch::StartsWith(message));
}

TEST_CASE("sim::read_results_csv reports an unreadable file by name", "[plot][csv]") {
  TempDir dir;
  REQUIRE_THROWS_WITH(read_results_csv(dir / "missing.csv"), Contains("missing.csv: cannot open file"));
  std::ofstream(dir / "results.csv") << nodes_by_strategy_csv();
  const auto t = read_results_csv(dir / "results.csv");
  CHECK(t.file == dir / "results.csv");
  CHECK(t.rows.size() == 10);
}

TEST_CASE("sim::make_plot writes the image with its data and script", "[plot][make_plot]") {
  TempDir dir;
  const auto t = parse_results_csv(nodes_by_strategy_csv(), "results.csv");
  PlotRequest r{"workers", "throughput_samples_per_s", "strategy.kind", "", 1000, 650};

  SECTION("PNG at the requested size, .dat and .gp beside it, nothing else left behind") {
    r.width_px = 800;
    r.height_px = 500;
    CHECK(make_plot(t, r, dir / "custom.png") == dir / "custom.png");
    require_png(dir / "custom.png", 800, 500);
    CHECK(files_in(dir.path()) == std::set<std::string>{"custom.png", "custom.dat", "custom.gp"});
    const std::string dat = read_bytes(dir / "custom.dat");
    CHECK_THAT(dat, Contains("# columns: 1 = GPUs [workers], 2 = throughput (samples/s) [throughput_samples_per_s]"));
    CHECK_THAT(dat, Contains("# block 0: strategy.kind=wfbp\n4 "));
    CHECK_THAT(dat, Contains("\n\n\n# block 1: strategy.kind=mg-wfbp\n")); // gnuplot `index` blocks
    const std::string gp = read_bytes(dir / "custom.gp");
    CHECK_THAT(gp, Contains("set terminal pngcairo size 800,500 font 'sans,12'"));
    CHECK_THAT(gp, Contains("set termoption noenhanced"));
    CHECK_THAT(gp, Contains("data = here.'custom.dat'"));
    CHECK_THAT(gp, Contains("set output here.'custom.png'"));
    CHECK_THAT(gp, Contains("set title 'resnet50-sweep: throughput vs GPUs'"));
    CHECK_THAT(gp, Contains("set logscale x 2")); // 4 to 64 GPUs span more than a factor 8
  }
  SECTION("SVG") {
    r.title = "it's mine";
    CHECK(make_plot(t, r, dir / "custom.svg") == dir / "custom.svg");
    require_svg(dir / "custom.svg");
    CHECK(files_in(dir.path()) == std::set<std::string>{"custom.svg", "custom.dat", "custom.gp"});
    CHECK_THAT(read_bytes(dir / "custom.gp"), Contains("set title 'it''s mine'")); // gnuplot's quote escape
  }
  SECTION("a categorical x is drawn at even positions with its values as tics") {
    r = PlotRequest{"strategy.kind", "iteration_time_s", "cluster.nodes", "", 1000, 650};
    make_plot(t, r, dir / "by_strategy.png");
    require_png(dir / "by_strategy.png", 1000, 650);
    const std::string dat = read_bytes(dir / "by_strategy.dat");
    CHECK_THAT(dat, Contains("# x positions: 0 = wfbp, 1 = mg-wfbp"));
    CHECK_THAT(dat, Contains("2 = iteration time (ms) [iteration_time_s]"));
    CHECK_THAT(read_bytes(dir / "by_strategy.gp"), Contains("set xtics ('wfbp' 0, 'mg-wfbp' 1)"));
  }
  SECTION("same table, byte-identical .dat and .gp, wherever they are written") {
    TempDir other;
    make_plot(t, r, dir / "a.png");
    make_plot(t, r, other / "a.png");
    CHECK(read_bytes(dir / "a.dat") == read_bytes(other / "a.dat"));
    CHECK(read_bytes(dir / "a.gp") == read_bytes(other / "a.gp"));
  }
  SECTION("the .gp redraws the image from any working directory") {
    make_plot(t, r, dir / "again.png");
    const std::string before = read_bytes(dir / "again.png");
    fs::remove(dir / "again.png");
    REQUIRE(std::system(fmt::format("cd / && gnuplot '{}'", dir / "again.gp").c_str()) == 0);
    require_png(dir / "again.png", 1000, 650);
    CHECK(read_bytes(dir / "again.png").size() == before.size());
  }
}

TEST_CASE("sim::make_plot rejects what it cannot draw, saying what would do", "[plot][make_plot]") {
  TempDir dir;
  const auto t = parse_results_csv(nodes_by_strategy_csv(), "results.csv");
  SECTION("unknown columns list the available ones") {
    PlotRequest r{"workers", "throughput", "", "", 1000, 650};
    REQUIRE_THROWS_AS(make_plot(t, r, dir / "p.png"), InputError);
    REQUIRE_THROWS_WITH(make_plot(t, r, dir / "p.png"),
                        Catch::StartsWith("results.csv: no column 'throughput' for y; available columns: point, "
                                          "cluster.nodes, strategy.kind, status, scenario, engine, workers,") &&
                            Contains("critical_path_s, error"));
    r = PlotRequest{"workers", "iteration_time_s", "strategy", "", 1000, 650};
    r.x = "nodes";
    REQUIRE_THROWS_WITH(make_plot(t, r, dir / "p.png"), Contains("no column 'nodes' for x; available columns: point,"));
    r.x = "workers";
    r.group = "kind";
    REQUIRE_THROWS_WITH(make_plot(t, r, dir / "p.png"), Contains("no column 'kind' for group;"));
  }
  SECTION("a y that is not a number names the cell and the numeric columns") {
    PlotRequest r{"workers", "strategy.kind", "", "", 1000, 650};
    REQUIRE_THROWS_AS(make_plot(t, r, dir / "p.png"), InputError);
    REQUIRE_THROWS_WITH(make_plot(t, r, dir / "p.png"),
                        Catch::StartsWith("results.csv: column 'strategy.kind' (y) is not numeric: 'wfbp' at point 0; "
                                          "numeric columns: point, cluster.nodes, workers,"));
  }
  SECTION("the output must be a .png or .svg, at a sane size") {
    PlotRequest r{"workers", "iteration_time_s", "", "", 1000, 650};
    REQUIRE_THROWS_WITH(make_plot(t, r, dir / "p.jpg"), Contains("must end in .png or .svg"));
    r.width_px = 0;
    REQUIRE_THROWS_WITH(make_plot(t, r, dir / "p.png"), Contains("plot size 0x650 is out of range"));
  }
  SECTION("a table without a successful point") {
    const auto failed = parse_results_csv("point,a,status,workers,error\n0,1,failed,,oops\n", "f.csv");
    REQUIRE_THROWS_WITH(make_plot(failed, PlotRequest{"a", "workers", "", "", 1000, 650}, dir / "p.png"),
                        "f.csv: no point with status ok: nothing to plot");
  }
  SECTION("a hand-built ragged table is an input error, not a crash") {
    ResultsTable ragged{"hand", {"point", "status", "workers"}, {{"0", "ok"}}};
    REQUIRE_THROWS_WITH(make_plot(ragged, PlotRequest{"point", "workers", "", "", 1000, 650}, dir / "p.png"),
                        "hand: row 1 has 2 cells, but the table has 3 columns");
  }
  CHECK(files_in(dir.path()).empty()); // nothing written on bad input
}

TEST_CASE("sim::make_plot without gnuplot names the script", "[plot][make_plot]") {
  TempDir dir, empty_path;
  const auto t = parse_results_csv(nodes_by_strategy_csv(), "results.csv");
  const std::string saved = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  ::setenv("PATH", empty_path.path().c_str(), 1);
  std::string message;
  try {
    (void)make_plot(t, PlotRequest{"workers", "iteration_time_s", "", "", 1000, 650}, dir / "p.png");
  } catch (const GnuplotMissing& e) { // a sweep notes it and goes on (#31 R16)
    message = e.what();
  }
  ::setenv("PATH", saved.c_str(), 1);
  CHECK_THAT(message, Catch::StartsWith(dir / "p.gp" + ": gnuplot is not on PATH"));
  CHECK(files_in(dir.path()) == std::set<std::string>{"p.dat", "p.gp"}); // no temporaries, no image
}

TEST_CASE("sim::sweep_plots chooses the plots from what was swept", "[plot][sweep]") {
  TempDir dir;
  const auto expect_images = [&](const std::vector<std::string>& written, const std::vector<std::string>& bases) {
    std::vector<std::string> expected;
    std::set<std::string> files;
    for (const auto& b : bases) {
      expected.push_back(dir / (b + ".png"));
      expected.push_back(dir / (b + ".svg"));
      for (const char* ext : {".png", ".svg", ".dat", ".gp"})
        files.insert(b + ext);
    }
    CHECK(written == expected);
    CHECK(files_in(dir.path()) == files); // no temporaries left behind
    for (const auto& b : bases) {
      require_png(dir / (b + ".png"), 1000, 650);
      require_svg(dir / (b + ".svg"));
    }
  };

  SECTION("nodes x strategy: scaling plots and the breakdown at the largest GPU count") {
    const auto t = parse_results_csv(nodes_by_strategy_csv(), "results.csv");
    expect_images(sweep_plots(t, dir.path().string()), {"throughput", "speedup", "scaling_efficiency", "breakdown"});

    const std::string throughput = read_bytes(dir / "throughput.dat");
    CHECK_THAT(throughput, Contains("# block 0: strategy.kind=wfbp\n4 "));
    CHECK_THAT(throughput, Contains("# block 2: ideal (linear)\n4 1015.873016\n")); // 4 x 64 / 0.252 s
    const std::string throughput_gp = read_bytes(dir / "throughput.gp");
    CHECK_THAT(throughput_gp, Contains("set xlabel 'GPUs'"));
    CHECK_THAT(throughput_gp, Contains("set ylabel 'throughput (samples/s)'"));
    CHECK_THAT(throughput_gp, Contains("set logscale x 2"));
    CHECK_THAT(throughput_gp, Contains("set xtics ('4' 4, '8' 8, '16' 16, '32' 32, '64' 64)"));
    CHECK_THAT(throughput_gp, Contains("dt 2 lc rgb 'black' title 'ideal (linear)'"));
    CHECK_THAT(throughput_gp, Contains("set output here.'throughput.svg'"));
    // Rising lines leave the top left free: the key goes there, opaque.
    CHECK_THAT(throughput_gp, Contains("set key top left box opaque\n"));

    // Speedup = workers x efficiency: 8 GPUs of wfbp expose 36 ms, so 8 x 252 / 288 = 7.
    CHECK_THAT(read_bytes(dir / "speedup.dat"), Contains("# block 0: strategy.kind=wfbp\n4 4 0\n8 7 2\n"));
    CHECK_THAT(read_bytes(dir / "scaling_efficiency.gp"), Contains("set ylabel 'scaling efficiency (%)'"));

    const std::string breakdown = read_bytes(dir / "breakdown.dat");
    CHECK_THAT(breakdown, Contains("\"wfbp\" 250 0 72 2 324 8\n\"mg-wfbp\" 250 0 48 2 300 9\n")); // 64 GPUs
    CHECK_THAT(read_bytes(dir / "breakdown.gp"),
               Contains("set title 'resnet50-sweep: iteration time breakdown'.\"\\n\"."
                        "'at 64 GPUs (the largest GPU count)'"));

    // Same table, same bytes, wherever it is drawn.
    TempDir again;
    sweep_plots(t, again.path().string());
    for (const char* file : {"throughput.dat", "throughput.gp", "speedup.dat", "speedup.gp", "scaling_efficiency.dat",
                             "scaling_efficiency.gp", "breakdown.dat", "breakdown.gp"}) {
      CAPTURE(file);
      CHECK(read_bytes(dir / file) == read_bytes(again / file));
    }
  }
  SECTION("bandwidth: throughput vs bandwidth in Gb/s on a log axis") {
    const auto t = parse_results_csv(bandwidth_csv(), "results.csv");
    expect_images(sweep_plots(t, dir.path().string()), {"throughput_vs_bandwidth"});
    const std::string dat = read_bytes(dir / "throughput_vs_bandwidth.dat");
    CHECK_THAT(dat, Contains("# columns: 1 = inter-node bandwidth (Gb/s) [cluster.inter_node.bandwidth]"));
    CHECK_THAT(dat, Contains("\n1 "));
    CHECK_THAT(dat, Contains("\n100 "));
    const std::string gp = read_bytes(dir / "throughput_vs_bandwidth.gp");
    CHECK_THAT(gp, Contains("set xlabel 'inter-node bandwidth (Gb/s)'"));
    CHECK_THAT(gp, Contains("set logscale x 10"));
  }
  SECTION("zipped keys: nodes with GPUs per node make one GPU axis, a model's zipped time adds nothing to labels") {
    // (nodes, GPUs per node) in (1, 1), (1, 2), (1, 4), (2, 4), (4, 4) x 3 strategies x 3 models (each zipped with
    // its 1-GPU iteration time): 9 lines, one point per GPU count each.
    std::vector<Point> points;
    const std::vector<std::pair<int, int>> configs{{1, 1}, {1, 2}, {1, 4}, {2, 4}, {4, 4}};
    const std::vector<std::tuple<std::string, std::string, double>> models{
        {"resnet50", "252 ms", 0.25}, {"bert-base", "302 ms", 0.3}, {"vgg16", "402 ms", 0.4}};
    for (const std::string strategy : {"bsp", "wfbp", "mg-wfbp"})
      for (const auto& [model, single, compute_s] : models)
        for (const auto& [nodes, gpus] : configs)
          points.push_back({{strategy, model, single, std::to_string(gpus), std::to_string(nodes)},
                            nodes * gpus,
                            0.001 * (nodes * gpus - 1),
                            strategy,
                            compute_s});
    const auto t = parse_results_csv(
        table_csv({"strategy.kind", "model.zoo", "gpu.single_gpu_iteration", "cluster.gpus_per_node", "cluster.nodes"},
                  points),
        "results.csv");
    expect_images(sweep_plots(t, dir.path().string()), {"throughput", "speedup", "scaling_efficiency", "breakdown"});

    const std::string dat = read_bytes(dir / "speedup.dat");
    CHECK_THAT(dat, Contains("# blocks are labelled by the values of: strategy.kind, model.zoo\n"));
    const std::string first = block_of(dat, 0);
    CHECK(first.starts_with("# block 0: bsp, resnet50\n1 1 0\n2 "));
    CHECK_THAT(first, Contains("\n16 "));
    CHECK_THAT(block_of(dat, 8), Contains("# block 8: mg-wfbp, vgg16\n"));
    CHECK_THAT(block_of(dat, 9), Contains("# block 9: ideal (linear)\n1 1\n2 2\n4 4\n8 8\n16 16"));

    // Nine lines: the key explains colours (strategies) and markers (models) instead of listing every line.
    const std::string gp = read_bytes(dir / "throughput.gp");
    CHECK_THAT(gp, Contains("keyentry with lines lt nodraw title 'strategy.kind'"));
    CHECK_THAT(gp, Contains("keyentry with lines lw 2 lc rgb '#f28e2b' title 'wfbp'"));
    CHECK_THAT(gp, Contains("keyentry with points pt 5 ps 1.3 lc rgb '#555555' title 'bert-base'"));
    // The models' single-GPU throughputs differ, the strategies' do not: the ideal is the first model's.
    CHECK_THAT(gp, Contains("title 'ideal (linear) for model.zoo=resnet50'"));

    // One cluster of strategy bars per model at 16 GPUs.
    const std::string breakdown = read_bytes(dir / "breakdown.gp");
    CHECK_THAT(breakdown, Contains("plot newhistogram 'resnet50' at 0, \\\n"));
    CHECK_THAT(breakdown, Contains("newhistogram 'bert-base' at 4, \\\n"));
    CHECK_THAT(breakdown, Contains("set xlabel 'strategy.kind (bars) by model.zoo (groups)'"));
    CHECK_THAT(read_bytes(dir / "breakdown.dat"), Contains("# block 1: model.zoo=bert-base\n\"bsp\" 300 "));
  }
  SECTION("nodes x GPUs per node as a product: lines per GPUs per node, so no line has two points at 2 GPUs") {
    std::vector<Point> points;
    for (const int nodes : {1, 2})
      for (const int gpus : {1, 2})
        points.push_back({{std::to_string(nodes), std::to_string(gpus)}, nodes * gpus, 0.001 * nodes});
    const auto t = parse_results_csv(table_csv({"cluster.nodes", "cluster.gpus_per_node"}, points), "results.csv");
    expect_images(sweep_plots(t, dir.path().string()), {"throughput", "speedup", "scaling_efficiency"});
    const std::string dat = read_bytes(dir / "throughput.dat");
    CHECK_THAT(block_of(dat, 0), Contains("# block 0: cluster.gpus_per_node=1\n1 "));
    CHECK_THAT(block_of(dat, 0), Contains("\n2 "));
    CHECK_THAT(block_of(dat, 1), Contains("# block 1: cluster.gpus_per_node=2\n2 "));
    CHECK_THAT(block_of(dat, 1), Contains("\n4 "));
  }
  SECTION("a numeric key beside the GPU count: iteration time against it too, in its unit") {
    std::vector<Point> points;
    for (const int nodes : {1, 2, 4})
      for (const std::string cap : {"1 MiB", "25 MiB", "100 MiB"})
        points.push_back({{std::to_string(nodes), cap}, nodes * 4, 0.01 * nodes});
    const auto t = parse_results_csv(table_csv({"cluster.nodes", "strategy.bucket_cap"}, points), "results.csv");
    // The strategy is ddp throughout: no breakdown.
    expect_images(sweep_plots(t, dir.path().string()),
                  {"throughput", "speedup", "scaling_efficiency", "iteration_time"});
    CHECK_THAT(read_bytes(dir / "iteration_time.dat"),
               Contains("# columns: 1 = strategy.bucket_cap (MiB), 2 = iteration time (ms) [iteration_time_s]"));
    CHECK_THAT(read_bytes(dir / "iteration_time.gp"), Contains("set logscale x 2")); // 1 to 100 MiB
    CHECK_THAT(block_of(read_bytes(dir / "iteration_time.dat"), 2), Contains("# block 2: cluster.nodes=4\n1 292 6\n"));
  }
  SECTION("too many bars: the breakdown holds the data rate at its slowest and leaves out the totals") {
    std::vector<Point> points;
    for (const std::string rate : {"10 Gbps", "100 Gbps"})
      for (const std::string strategy : {"bsp", "wfbp", "mg-wfbp", "ddp", "fusion"})
        for (const std::string model : {"m1", "m2", "m3", "m4", "m5", "m6"})
          points.push_back({{rate, strategy, model}, 32, rate == "10 Gbps" ? 0.1 : 0.01, strategy});
    const auto t = parse_results_csv(table_csv({"cluster.inter_node.bandwidth", "strategy.kind", "model.zoo"}, points),
                                     "results.csv");
    expect_images(sweep_plots(t, dir.path().string()), {"breakdown", "throughput_vs_bandwidth"});
    const std::string gp = read_bytes(dir / "breakdown.gp");
    CHECK_THAT(gp, Contains("cluster.inter_node.bandwidth = 10 Gb/s (the slowest)'"));
    CHECK_THAT(gp, !Contains("with labels"));                          // 30 bars: no room for the totals
    CHECK_THAT(read_bytes(dir / "breakdown.dat"), !Contains(" 262 ")); // nothing at 100 Gb/s (10 ms exposed)
  }
  SECTION("a latency zipped with the bandwidth is no axis of its own") {
    std::vector<Point> points;
    for (const auto& [rate, latency] : std::vector<std::pair<std::string, std::string>>{
             {"10 Gbps", "25 us"}, {"25 Gbps", "10 us"}, {"100 Gbps", "1 us"}})
      points.push_back({{rate, latency}, 32, 0.1});
    const auto t = parse_results_csv(table_csv({"cluster.inter_node.bandwidth", "cluster.inter_node.latency"}, points),
                                     "results.csv");
    expect_images(sweep_plots(t, dir.path().string()), {"throughput_vs_bandwidth"});
    CHECK_THAT(read_bytes(dir / "throughput_vs_bandwidth.dat"), Contains("# block 0: simulated\n10 "));
  }
  SECTION("a swept key named like a summary field: whole strategy objects, with quotes in their JSON") {
    std::vector<Point> points;
    for (const int nodes : {1, 2, 4})
      for (const auto& [object, kind] : std::vector<std::pair<std::string, std::string>>{
               {R"("{""kind"":""wfbp""}")", "wfbp"}, {R"("{""kind"":""topk"",""density"":0.01}")", "topk"}})
        points.push_back({{object, std::to_string(nodes)}, nodes * 4, kind == "wfbp" ? 0.01 * nodes : 0.002, kind});
    const auto t = parse_results_csv(table_csv({"strategy", "cluster.nodes"}, points), "results.csv");
    CHECK(t.column("strategy") == 1); // the first of the two: the swept key
    CHECK(t.swept_keys() == std::vector<std::string>{"strategy", "cluster.nodes"});
    expect_images(sweep_plots(t, dir.path().string()), {"throughput", "speedup", "scaling_efficiency", "breakdown"});
    // Labelled by the kind, then the object's other keys, not by its JSON.
    CHECK_THAT(read_bytes(dir / "throughput.gp"), Contains("title 'strategy=topk (density=0.01)'"));
    CHECK_THAT(read_bytes(dir / "breakdown.dat"), Contains("\"wfbp\" 250 0 40 2 292 4"));
    CHECK_THAT(read_bytes(dir / "breakdown.dat"), Contains("\"topk (density=0.01)\" 250 0 2 2 254 5"));
  }
  SECTION("another numeric key: iteration time vs that key") {
    std::string csv = fmt::format("point,model.batch_per_gpu,status,{},error\n", kSummaryHeader);
    for (const int batch : {16, 32, 64})
      csv += fmt::format("{},{},ok,{},\n", batch / 32, batch, summary_cells(8, 0.001 * batch, "ddp"));
    expect_images(sweep_plots(parse_results_csv(csv, "results.csv"), dir.path().string()), {"iteration_time"});
    CHECK_THAT(read_bytes(dir / "iteration_time.gp"), Contains("set ylabel 'iteration time (ms)'"));
    CHECK_THAT(read_bytes(dir / "iteration_time.gp"), Contains("set xlabel 'batch per GPU'"));
  }
  SECTION("nothing sensible: one point, or every point failed") {
    auto t = parse_results_csv(nodes_by_strategy_csv(), "results.csv");
    auto one = t;
    one.rows.resize(1);
    CHECK(sweep_plots(one, dir.path().string()).empty());
    for (auto& row : t.rows)
      row[static_cast<std::size_t>(t.column("status"))] = "failed";
    CHECK(sweep_plots(t, dir.path().string()).empty());
    CHECK(files_in(dir.path()).empty());
  }
}

TEST_CASE("sim::a swept whole strategy object is labelled by its kind and its other keys", "[plot][sweep]") {
  // A sweep over "strategy": [{"kind": "qsgd", "levels": 7}, ...] has JSON objects in its column.
  const std::string csv = "point,cluster.nodes,strategy,status,iteration_time_s,throughput_samples_per_s\n"
                          "0,4,\"{\"\"kind\"\":\"\"ddp\"\"}\",ok,0.2,640\n"
                          "1,4,\"{\"\"kind\"\":\"\"qsgd\"\",\"\"levels\"\":7}\",ok,0.1,1280\n"
                          "2,8,\"{\"\"kind\"\":\"\"ddp\"\"}\",ok,0.25,1024\n"
                          "3,8,\"{\"\"kind\"\":\"\"qsgd\"\",\"\"levels\"\":7}\",ok,0.12,2133\n";
  const auto t = parse_results_csv(csv, "results.csv");
  TempDir dir;
  make_plot(t, {"cluster.nodes", "throughput_samples_per_s", "strategy", "", 1000, 650}, dir / "p.svg");
  const std::string dat = read_bytes(dir / "p.dat");
  CHECK_THAT(dat, Contains("# block 0: strategy=ddp\n"));
  CHECK_THAT(dat, Contains("# block 1: strategy=qsgd (levels=7)\n"));
}
