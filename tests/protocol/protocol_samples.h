// Sample values with every field set to something other than its default, shared by the
// protocol tests.
#pragma once

#include "model/job.h"
#include "model/lease.h"
#include "protocol/envelope.h"

namespace gpuman::protocol::testing_samples {

inline model::GpuRequest FullGpuRequest() {
  model::GpuRequest r;
  r.count = 2;
  r.gpus = std::vector<std::string>{"GPU-aaaa", "GPU-bbbb"};
  r.min_free_memory_bytes = int64_t{40} << 30;
  r.max_utilization_percent = 10;
  r.model = "A100";
  r.min_compute_capability = "8.0";
  r.exclude = {"GPU-cccc"};
  r.allow_shared = true;
  return r;
}

inline model::Job FullJob() {
  model::Job j;
  j.id = 42;
  j.name = "train";
  j.uid = 1000;
  j.gid = 100;
  j.user = "alice";
  j.argv = {"python", "train.py", "--lr=3e-4"};
  j.env = {{"PATH", "/usr/bin"}, {"HOME", "/home/alice"}};
  j.cwd = "/home/alice/proj";
  j.output_path = "/home/alice/proj/train.log";
  j.request = FullGpuRequest();
  j.priority = -5;
  j.time_limit_ms = 3600000;
  j.requeue = true;
  j.after = {40, 41};
  j.state = model::JobState::kRunning;
  j.submitted_unix_ms = 1700000000000;
  j.started_unix_ms = 1700000001000;
  j.ended_unix_ms = 1700000002000;
  j.exit_code = 3;
  j.gpu_uuids = {"GPU-aaaa", "GPU-bbbb"};
  j.lease_id = 9;
  j.supervisor_pid = 4242;
  j.supervisor_start_ticks = 123456;
  j.reason = "waiting for job 40";
  return j;
}

inline model::Lease FullLease() {
  model::Lease l;
  l.id = 9;
  l.gpu_uuids = {"GPU-aaaa"};
  l.uid = 1000;
  l.user = "alice";
  l.command = "python train.py";
  l.kind = "run";
  l.created_unix_ms = 1700000000000;
  l.processes = {{4242, 123456}, {4243, 123460}};
  return l;
}

// One request per op, in the order of Op.
inline std::vector<Request> OneRequestPerOp() {
  SubmitArgs submit;
  submit.name = "train";
  submit.argv = {"python", "train.py"};
  submit.env = {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}, {"LANG", "C.UTF-8"}};
  submit.cwd = "/home/alice";
  submit.output = "/home/alice/out.log";
  submit.request = FullGpuRequest();
  submit.priority = 7;
  submit.time_limit_ms = 60000;
  submit.requeue = true;
  submit.after = {1, 2};

  AcquireArgs acquire;
  acquire.request = FullGpuRequest();
  acquire.command = "python train.py";
  acquire.pid = 4242;
  acquire.start_time_ticks = 987654321;
  acquire.wait_ms = 5000;

  StatusArgs status;
  status.options = {{"processes", true}};

  return {
      Request{1, HelloArgs{"gpuman 0.1.0", 1}},
      Request{2, submit},
      Request{3, QueueArgs{true}},
      Request{4, ShowArgs{42}},
      Request{5, CancelArgs{{1, 2, 3}}},
      Request{6, HoldArgs{{4}}},
      Request{7, ResumeArgs{{4, 5}}},
      Request{8, WaitArgs{42}},
      Request{9, LogsArgs{42, 65536}},
      Request{10, DrainArgs{"GPU-aaaa", "fan noise"}},
      Request{11, UndrainArgs{"2", "fixed"}},
      Request{12, LeasesArgs{}},
      Request{13, acquire},
      Request{14, AddProcessesArgs{9, {{100, 5}, {101, 6}}}},
      Request{15, ReleaseArgs{9}},
      Request{int64_t{1} << 62, status},
      Request{16, HealthArgs{}},
      Request{17, DrainsArgs{}},
  };
}

}  // namespace gpuman::protocol::testing_samples
