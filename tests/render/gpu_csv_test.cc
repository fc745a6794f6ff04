// render/gpu_csv: the field table of `status --format csv` (nvidia-smi's --query-gpu
// lines), its parser, its rendering, and docs/cli.md's copy of the table. Also the text
// view's `--units mib` (nvidia-smi's MiB figures), the other habit issue 26 carries over.
#include "render/gpu_csv.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/strings.h"
#include "render/status_fixtures.h"
#include "render/status_view.h"

namespace gpuman::render {
namespace {

using namespace testing_fixtures;

std::vector<const GpuCsvField*> Fields(std::string_view list) {
  auto fields = ParseGpuCsvFields(list);
  EXPECT_TRUE(fields.has_value()) << list << ": " << fields.error().message;
  return fields ? *fields : std::vector<const GpuCsvField*>{};
}

std::string ParseError(std::string_view list) {
  auto fields = ParseGpuCsvFields(list);
  if (fields) return "(parsed)";
  EXPECT_EQ(fields.error().code, ErrorCode::kInvalidArgument);
  return fields.error().message;
}

std::string Csv(const model::MachineSnapshot& snap, const StatusOptions& opts, std::string_view list,
                GpuCsvOptions csv = {}) {
  const auto fields = Fields(list);
  return RenderGpuCsvHeader(fields, csv) + RenderGpuCsvRows(snap, opts, fields, csv);
}

constexpr std::string_view kNvidiaFields =
    "index,name,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw,power.limit,fan.speed,pstate,"
    "clocks.sm,persistence_mode,compute_mode,mig.mode.current";

TEST(GpuCsvTest, NvidiaFieldsAsNvidiaSmiPrintsThem) {
  EXPECT_EQ(Csv(FourGpuMachine(), {}, kNvidiaFields),
            "index, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%], temperature.gpu, "
            "power.draw [W], power.limit [W], fan.speed [%], pstate, clocks.current.sm [MHz], persistence_mode, "
            "compute_mode, mig.mode.current\n"
            "0, NVIDIA A100-SXM4-80GB, 512 MiB, 81920 MiB, 0 %, 34, 61.25 W, 400.00 W, [N/A], P0, 210 MHz, Enabled, "
            "Default, Disabled\n"
            // 71.2 GiB = 72908.8 MiB: whole MiB, rounded down.
            "1, NVIDIA A100-SXM4-80GB, 72908 MiB, 81920 MiB, 97 %, 78, 380.40 W, 400.00 W, [N/A], P0, 1275 MHz, "
            "Enabled, Default, Disabled\n"
            "2, NVIDIA A100-SXM4-80GB, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], "
            "[N/A]\n"
            "3, NVIDIA GeForce RTX 4090 Founders Edition Overclocked, [N/A], 24576 MiB, 55 %, [N/A], [N/A], 450.00 W, "
            "30 %, [N/A], [N/A], [N/A], [N/A], [N/A]\n");
}

TEST(GpuCsvTest, NoheaderAndNounits) {
  GpuCsvOptions csv;
  csv.header = false;
  csv.units = false;
  model::MachineSnapshot snap = FourGpuMachine();
  snap.gpus.resize(2);
  EXPECT_EQ(Csv(snap, {}, "index,memory.used,power.draw,clocks.mem", csv), "0, 512, 61.25, 1593\n1, 72908, 380.40, 1593\n");
  csv.header = true;
  EXPECT_EQ(RenderGpuCsvHeader(Fields("index,memory.used,clocks.max.mem"), csv), "index, memory.used, clocks.max.memory\n");
  csv.header = false;
  EXPECT_EQ(RenderGpuCsvHeader(Fields("index"), csv), "");
}

TEST(GpuCsvTest, IdentityClocksEccAndTimestamp) {
  model::MachineSnapshot snap = FourGpuMachine();
  snap.gpus.resize(1);
  snap.gpus[0].compute_mode = "exclusive_process";
  snap.gpus[0].ecc_volatile_uncorrected = 3;
  EXPECT_EQ(Csv(snap, {}, "uuid,pci.bus_id,serial,compute_cap,driver_version,clocks.max.sm,compute_mode,"
                          "ecc.errors.uncorrected.volatile.total,memory.free,memory.reserved,timestamp"),
            "uuid, pci.bus_id, serial, compute_cap, driver_version, clocks.max.sm [MHz], compute_mode, "
            "ecc.errors.uncorrected.volatile.total, memory.free [MiB], memory.reserved [MiB], timestamp\n"
            "GPU-3f2a9c1d-5b6e-4f70-8a91-0c2d3e4f5a6b, 00000000:07:00.0, 1322621034567, 8.0, 550.54.15, 1410 MHz, "
            "Exclusive_Process, 3, 81408 MiB, 0 MiB, 2024/05/01 12:00:00.250\n");
}

TEST(GpuCsvTest, ControlCharactersInValuesAreEscaped) {
  model::MachineSnapshot snap = FourGpuMachine();
  snap.gpus.resize(1);
  snap.gpus[0].name = "A100\nfake, line";
  EXPECT_EQ(RenderGpuCsvRows(snap, {}, Fields("index,name"), {}), "0, A100\\nfake, line\n");
}

// Leases, a job's lease, processes outside gpuman and a drain, as `status` shows them.
StatusOptions Holders() {
  StatusOptions opts;
  model::Lease run;
  run.id = 5;
  run.gpu_uuids = {*IdleGpu().uuid};
  run.user = "alice";
  run.kind = "run";
  model::Lease older;  // the newest lease naming a GPU is the one shown
  older.id = 4;
  older.gpu_uuids = {*IdleGpu().uuid};
  older.user = "zed";
  model::Lease job;
  job.id = 7;
  job.gpu_uuids = {*LostGpu().uuid};
  job.user = "bob";
  job.kind = "job";
  job.command = "job 12 (train)";
  opts.leases = std::vector<model::Lease>{run, older, job};
  opts.drains = {model::GpuDrain{*SparseGpu().uuid, "fan noise", 0, "root", 0}};
  return opts;
}

constexpr std::string_view kGpumanFields =
    "index,gpuman.holder,gpuman.lease,gpuman.job,gpuman.health,gpuman.processes,gpuman.drained";

TEST(GpuCsvTest, GpumanFieldsSayWhoHoldsEachGpu) {
  GpuCsvOptions csv;
  csv.header = false;
  csv.lease_jobs = {{7, 12}};
  EXPECT_EQ(Csv(FourGpuMachine(), Holders(), kGpumanFields, csv),
            "0, alice, 5, , ok, 0, no\n"
            // Three users outside gpuman (one whose process we cannot see), by name.
            "1, (unknown);alice;bartholomew_long_name, , , ok, 3, no\n"
            "2, bob, 7, 12, unhealthy, 0, no\n"
            "3, uid 1234, , , unhealthy, 1, yes\n");
}

TEST(GpuCsvTest, UnknownLeasesAndProcessesAreNotFree) {
  GpuCsvOptions csv;
  csv.header = false;
  StatusOptions unknown_leases;  // the lease table could not be read
  model::MachineSnapshot snap = FourGpuMachine();
  snap.gpus.resize(2);
  EXPECT_EQ(Csv(snap, unknown_leases, kGpumanFields, csv),
            "0, [N/A], [N/A], [N/A], ok, 0, no\n"
            "1, [N/A], [N/A], [N/A], ok, 3, no\n");
  // --no-processes: no process was read, so a GPU without a lease has an unknown holder.
  StatusOptions no_processes = Holders();
  no_processes.show_processes = false;
  snap.gpus[1].processes.clear();
  EXPECT_EQ(Csv(snap, no_processes, kGpumanFields, csv),
            "0, alice, 5, , ok, [N/A], no\n"
            "1, [N/A], , , ok, [N/A], no\n");
}

TEST(GpuCsvParseTest, NamesAliasesCaseAndBlanks) {
  const auto fields = Fields(" index , GPU_NAME,gpu_uuid,clocks.current.memory,Memory.Used,index");
  ASSERT_EQ(fields.size(), 6u);
  EXPECT_EQ(fields[0]->name, "index");
  EXPECT_EQ(fields[1]->name, "name");
  EXPECT_EQ(fields[2]->name, "uuid");
  EXPECT_EQ(fields[3]->name, "clocks.mem");
  EXPECT_EQ(fields[4]->name, "memory.used");
  EXPECT_EQ(fields[5]->name, "index");  // repeats are kept, as nvidia-smi does
  EXPECT_EQ(Fields(kDefaultGpuCsvFields).size(), 7u);
}

TEST(GpuCsvParseTest, UnknownFieldSaysWhatWasMeant) {
  EXPECT_EQ(ParseError("index,memory.usd"), "unknown GPU field 'memory.usd' (did you mean 'memory.used'?)");
  EXPECT_EQ(ParseError("holder"), "unknown GPU field 'holder' (did you mean 'gpuman.holder'?)");
  EXPECT_EQ(ParseError("temperature"), "unknown GPU field 'temperature' (did you mean 'temperature.gpu'?)");
  EXPECT_EQ(ParseError("indx"), "unknown GPU field 'indx' (did you mean 'index'?)");
  const std::string far = ParseError("frobnicate");
  EXPECT_EQ(far.rfind("unknown GPU field 'frobnicate' (fields: index, uuid, name, pci.bus_id,", 0), 0u) << far;
  EXPECT_NE(far.find(", gpuman.drained)"), std::string::npos) << far;
  EXPECT_EQ(ParseError("index,,name"), "empty GPU field name in 'index,,name'");
  EXPECT_EQ(ParseError(" "), "no GPU fields given (e.g. index,memory.used)");
  EXPECT_EQ(ParseError("bad\x1b[2Jname"), "unknown GPU field 'bad\\x1b[2Jname' (fields: index, uuid, name, pci.bus_id, "
                                          "serial, memory.total, memory.used, memory.free, memory.reserved, "
                                          "utilization.gpu, utilization.memory, temperature.gpu, power.draw, "
                                          "power.limit, fan.speed, pstate, compute_cap, driver_version, clocks.sm, "
                                          "clocks.max.sm, clocks.mem, clocks.max.mem, persistence_mode, compute_mode, "
                                          "mig.mode.current, mig.mode.pending, ecc.errors.corrected.volatile.total, "
                                          "ecc.errors.uncorrected.volatile.total, ecc.errors.corrected.aggregate.total, "
                                          "ecc.errors.uncorrected.aggregate.total, timestamp, gpuman.holder, "
                                          "gpuman.lease, gpuman.job, gpuman.health, gpuman.processes, gpuman.drained)");
}

TEST(GpuCsvTableTest, EveryNameIsUniqueLowerCaseAndParsesToItsField) {
  std::set<std::string> seen;
  for (const GpuCsvField& field : GpuCsvFields()) {
    std::vector<std::string> names = {std::string(field.name)};
    std::istringstream aliases{std::string(field.aliases)};
    for (std::string alias; aliases >> alias;) names.push_back(alias);
    for (const std::string& name : names) {
      EXPECT_TRUE(seen.insert(name).second) << name << " names two fields";
      EXPECT_EQ(name, ToLower(name));
      const auto parsed = Fields(name);
      ASSERT_EQ(parsed.size(), 1u) << name;
      EXPECT_EQ(parsed[0], &field) << name;
    }
    EXPECT_FALSE(field.header.empty()) << field.name;
    EXPECT_FALSE(field.meaning.empty()) << field.name;
    EXPECT_NE(field.value, nullptr) << field.name;
    // nvidia-smi's fields keep its names; gpuman's own are marked as such.
    EXPECT_EQ(field.name.starts_with("gpuman."), field.header.starts_with("gpuman.")) << field.name;
  }
  EXPECT_GE(seen.size(), 37u);
}

TEST(GpuCsvTableTest, EveryFieldRendersOnEveryFixtureGpu) {
  std::string all;
  for (const GpuCsvField& field : GpuCsvFields()) all += (all.empty() ? "" : ",") + std::string(field.name);
  const std::string rows = RenderGpuCsvRows(FourGpuMachine(), Holders(), Fields(all), {});
  const size_t expected_cells = GpuCsvFields().size();
  std::istringstream in(rows);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    // Values never contain ", " on these GPUs: one cell per field.
    size_t cells = 1;
    for (size_t at = line.find(", "); at != std::string::npos; at = line.find(", ", at + 2)) ++cells;
    EXPECT_EQ(cells, expected_cells) << line;
  }
  EXPECT_EQ(lines, 4);
}

// docs/cli.md's field table, between its markers, is this table: regenerate it from the
// test's failure message when a field changes.
std::string DocsTable() {
  std::string out = "| field | header (nvidia-smi's) | also accepted | meaning |\n|---|---|---|---|\n";
  for (const GpuCsvField& field : GpuCsvFields()) {
    std::string header = "`" + std::string(field.header) + (field.unit.empty() ? "" : " [" + std::string(field.unit) + "]") + "`";
    std::string aliases;
    std::istringstream in{std::string(field.aliases)};
    for (std::string alias; in >> alias;) aliases += (aliases.empty() ? "`" : ", `") + alias + "`";
    out += "| `" + std::string(field.name) + "` | " + header + " | " + aliases + " | " + std::string(field.meaning) + " |\n";
  }
  return out;
}

TEST(GpuCsvTableTest, DocsListEveryField) {
  std::ifstream in(std::string(GPUMAN_TEST_DOCS_DIR) + "/cli.md");
  ASSERT_TRUE(in.good());
  std::string docs, line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.find("<!-- gpu-csv-fields: begin") == 0) inside = true;
    else if (line.find("<!-- gpu-csv-fields: end") == 0) inside = false;
    else if (inside) docs += line + "\n";
  }
  EXPECT_EQ(docs, DocsTable()) << "docs/cli.md's field table should read:\n" << DocsTable();
}

TEST(StatusTextMibTest, UnitsMibPrintsWholeMibAsNvidiaSmi) {
  StatusOptions mib;
  mib.memory_in_mib = true;
  const std::string text = RenderStatusText(FourGpuMachine(), mib, TerminalInfo{140, false});
  EXPECT_NE(text.find("512/81920 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("72908/81920 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("-/24576 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("41260 MiB"), std::string::npos) << text;  // alice's process: 40 GiB + 300 MiB
  EXPECT_EQ(text.find("GiB"), std::string::npos) << text;
  const std::string gib = RenderStatusText(FourGpuMachine(), {}, TerminalInfo{140, false});
  EXPECT_NE(gib.find("0.5/80.0 GiB"), std::string::npos) << gib;
}

}  // namespace
}  // namespace gpuman::render
