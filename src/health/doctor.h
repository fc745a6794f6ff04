// `gpuman doctor`'s verdicts (issue 24; docs/doctor.md): each check is one line, ok, warn
// or fail, with the cause and the fix. This file is the pure part: what a framework's probe
// found, judged against the GPUs and the driver. The CLI gathers the facts
// (src/cli/doctor_command.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpuman::health {

struct DoctorCheck {
  std::string name;    // "driver", "torch", ...
  std::string status;  // "ok", "warn", "fail"
  std::string message;
  std::string fix;     // "" when there is nothing to do
};

/// What the probe of `torch` printed (its fields as the probe script names them).
struct TorchProbe {
  bool importable = false;
  std::string error;                // why it did not import
  std::string version;              // torch.__version__
  std::optional<std::string> cuda;  // torch.version.cuda; nullopt: a CPU-only build
  bool available = false;           // torch.cuda.is_available()
  int device_count = 0;             // torch.cuda.device_count()
  std::vector<std::string> arch_list;  // torch.cuda.get_arch_list(): "sm_80", "compute_90"
};

/// A GPU the framework will see: its index (for messages) and compute capability "9.0".
struct VisibleGpu {
  int index = 0;
  std::string name;
  std::string compute_capability;
};

/// Whether code built for `arch_list` runs on compute capability `cc` ("12.0"), and how:
/// "sm_90" (a cubin of the same major and a minor no higher: binary compatible), or
/// "compute_90 (PTX, compiled by the driver at first use)" (PTX of a capability no higher).
/// Architecture-specific targets ("sm_90a") run only on that capability. nullopt: nothing
/// runs there: "no kernel image is available for execution on the device".
std::optional<std::string> ArchThatRuns(const std::vector<std::string>& arch_list, const std::string& cc);

/// What the probe of TensorFlow printed: tf.__version__, tf.sysconfig.get_build_info()
/// (is_cuda_build, cuda_version, cuda_compute_capabilities) and
/// tf.config.list_physical_devices('GPU').
struct TensorflowProbe {
  bool importable = false;
  std::string version;
  bool cuda_build = false;              // is_cuda_build
  std::optional<std::string> cuda;      // cuda_version ("12.3")
  std::vector<std::string> arch_list;   // cuda_compute_capabilities: "sm_80", "compute_90"
  int device_count = 0;                 // GPUs it lists
};

/// What the probe of JAX printed: jax.__version__ and, of jax.devices(), how many are GPUs
/// and the platform of the first ("cpu" for a jaxlib without a CUDA plugin).
struct JaxProbe {
  bool importable = false;
  std::string version;
  std::string platform;  // jax.devices()[0].platform: "gpu", "cuda", "cpu", ...
  int device_count = 0;  // devices whose platform is a GPU's
  std::string error;     // jax.devices() raised: its message
};

/// The TensorFlow checks (names tf, tf_cuda, tf_available, tf_arch, tf_devices): the same
/// rules as torch's, from its build info.
std::vector<DoctorCheck> JudgeTensorflow(const TensorflowProbe& probe, const std::vector<VisibleGpu>& gpus,
                                         const std::optional<std::string>& driver_cuda, int expected_visible);

/// The JAX checks (jax, jax_devices): GPUs visible but jax.devices() has none (a jaxlib
/// without its CUDA plugin, or a plugin that failed to load), or a count that differs.
/// JAX reports neither its CUDA version nor its architectures through these calls.
std::vector<DoctorCheck> JudgeJax(const JaxProbe& probe, const std::vector<VisibleGpu>& gpus, int expected_visible);

/// The torch checks: the build's CUDA against the driver's (`driver_cuda` "12.4"; a build
/// needs a driver of at least its CUDA major version, minor-version compatibility covers
/// the rest), a CPU-only build on a machine with GPUs, CUDA not available, the compiled
/// architectures against every visible GPU, and how many GPUs torch sees against what
/// the environment makes visible (`expected_visible`).
std::vector<DoctorCheck> JudgeTorch(const TorchProbe& probe, const std::vector<VisibleGpu>& gpus,
                                    const std::optional<std::string>& driver_cuda, int expected_visible);

}  // namespace gpuman::health
