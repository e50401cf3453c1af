// gfd-judge: GPU Feature Discovery's own labelers (NVIDIA/k8s-device-plugin's
// internal/lm, its resource manager and config loading, go-nvlib's device library)
// run once over an NVML recording instead of libnvidia-ml, printing the labels GFD
// would write. tests/e2e/build-gfd.sh places this package into a copy of the
// downloaded module (so that its internal/ packages can be imported) and builds it.
//
// GFD's flags (names, environment variables and defaults of
// cmd/gpu-feature-discovery/main.go) are declared again here because a main package
// cannot be imported; GFD's own spec.NewConfig turns them and --config-file into its
// config. GFD's sysfs reads (PCI class, vGPU capability, machine type) read /sys: the
// caller runs this in a mount namespace with the fixture's sys/ on /sys.
//
// Harness flags: --nvml FILE (the recording; absent: no NVML library on the node),
// --cuda FILE (a CUDA recording, answered by the fake libcuda.so.1 the caller puts on
// LD_LIBRARY_PATH: cuda.go), --root DIR (the fixture: where go-nvlib's own Tegra
// detection looks for etc/nv_tegra_release and sys/devices/soc0/family),
// --repeat N (label N times; GFD picks among GPU models in Go map order, so one node can
// get different labels: every distinct result is printed).
//
// Output (stdout, JSON): {"outputs": [{label: value}, ...], "dropped": {label: value},
// "error": "..."}; an error means GFD exits non-zero without writing labels. Labels
// nfd-worker would ignore (an invalid name or value: pkg/nfd-worker/nfd-worker.go:818-831
// of NFD v0.19.0, the same apimachinery checks) are moved from outputs to dropped: they
// never reach the node (the vfio strategy's gpu.compute.major=-1).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	nvinfo "github.com/NVIDIA/go-nvlib/pkg/nvlib/info"
	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/util/validation"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	"github.com/NVIDIA/k8s-device-plugin/internal/lm"
	"github.com/NVIDIA/k8s-device-plugin/internal/resource"
	"github.com/NVIDIA/k8s-device-plugin/internal/vgpu"
)

type result struct {
	Outputs []map[string]string `json:"outputs"`
	Dropped map[string]string   `json:"dropped,omitempty"`
	Error   string              `json:"error,omitempty"`
}

func gfdFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mig-strategy", Value: spec.MigStrategyNone, EnvVars: []string{"GFD_MIG_STRATEGY", "MIG_STRATEGY"}},
		&cli.BoolFlag{Name: "fail-on-init-error", Value: true, EnvVars: []string{"GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"}},
		&cli.BoolFlag{Name: "oneshot", Value: false, EnvVars: []string{"GFD_ONESHOT"}},
		&cli.BoolFlag{Name: "no-timestamp", Value: false, EnvVars: []string{"GFD_NO_TIMESTAMP"}},
		&cli.GenericFlag{Name: "sleep-interval", Value: spec.NewDurationValue(60 * time.Second), EnvVars: []string{"GFD_SLEEP_INTERVAL"}},
		&cli.StringFlag{Name: "output-file", Aliases: []string{"output", "o"}, Value: "/etc/kubernetes/node-feature-discovery/features.d/gfd", EnvVars: []string{"GFD_OUTPUT_FILE"}},
		&cli.StringFlag{Name: "machine-type-file", Value: "/sys/class/dmi/id/product_name", EnvVars: []string{"GFD_MACHINE_TYPE_FILE"}},
		&cli.StringFlag{Name: "config-file", EnvVars: []string{"GFD_CONFIG_FILE", "CONFIG_FILE"}},
		&cli.BoolFlag{Name: "use-node-feature-api", Value: true, EnvVars: []string{"GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"}},
		&cli.StringFlag{Name: "device-discovery-strategy", Value: "auto", EnvVars: []string{"DEVICE_DISCOVERY_STRATEGY"}},
		&cli.StringFlag{Name: "driver-root-ctr-path", Aliases: []string{"container-driver-root"}, Value: spec.DefaultContainerDriverRoot, EnvVars: []string{"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"}},
	}
}

// props is go-nvlib's own platform detection, except that "is libnvidia-ml.so.1
// loadable" is "does the node have an NVML recording".
type props struct {
	nvinfo.Interface
	hasNvml bool
}

func (p props) HasNvml() (bool, string) {
	if p.hasNvml {
		return true, "NVML recording"
	}
	return false, "no NVML recording"
}

func label(c *cli.Context, flags []cli.Flag) (map[string]string, error) {
	config, err := spec.NewConfig(c, flags)
	if err != nil {
		return nil, fmt.Errorf("unable to load config: unable to finalize config: %v", err)
	}
	switch *config.Flags.DeviceDiscoveryStrategy {
	case "auto", "nvml", "tegra", "vfio":
	default:
		return nil, fmt.Errorf("invalid --device-discovery-strategy option %v", *config.Flags.DeviceDiscoveryStrategy)
	}
	spec.DisableResourceNamingInConfig(config)

	var lib *server
	if path := c.String("nvml"); path != "" {
		if lib, err = loadRecording(path); err != nil {
			return nil, err
		}
	} else {
		lib = &server{rec: record{"nvmlInit": json.RawMessage(`{"error": "LibraryNotFound"}`)}, symbols: map[string]bool{}}
		lib.setFuncs()
	}
	devicelib := device.New(lib)
	if path := c.String("cuda"); path != "" {
		answers, err := cudaAnswers(path)
		if err != nil {
			return nil, err
		}
		if err := os.Setenv("FAKE_CUDA_ANSWERS", answers); err != nil {
			return nil, err
		}
	}
	real := nvinfo.New(nvinfo.WithNvmlLib(lib), nvinfo.WithDeviceLib(devicelib), nvinfo.WithRoot(c.String("root")))
	infolib := nvinfo.New(
		nvinfo.WithNvmlLib(lib),
		nvinfo.WithDeviceLib(devicelib),
		nvinfo.WithPropertyExtractor(props{Interface: real, hasNvml: c.String("nvml") != ""}),
	)
	manager, err := resource.NewManager(infolib, lib, devicelib, config)
	if err != nil {
		return nil, fmt.Errorf("failed to create resource manager: %w", err)
	}
	labelers, err := lm.NewLabelers(manager, vgpu.NewVGPULib(vgpu.NewNvidiaPCILib()), config)
	if err != nil {
		return nil, err
	}
	labels, err := lm.Merge(lm.NewTimestampLabeler(config), labelers).Labels()
	if err != nil {
		return nil, fmt.Errorf("error generating labels: %v", err)
	}
	return labels, nil
}

// untimed is a label map without gfd.timestamp (its value changes between runs).
func untimed(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if k != "nvidia.com/gfd.timestamp" {
			out[k] = v
		}
	}
	return out
}

func main() {
	flags := append(gfdFlags(),
		&cli.StringFlag{Name: "nvml"},
		&cli.StringFlag{Name: "cuda"},
		&cli.StringFlag{Name: "root", Value: "/"},
		&cli.IntFlag{Name: "repeat", Value: 1},
	)
	app := cli.NewApp()
	app.Name = "gfd-judge"
	app.Flags = flags
	app.Action = func(c *cli.Context) error {
		var res result
		for i := 0; i < c.Int("repeat"); i++ {
			labels, err := label(c, flags)
			if err != nil {
				res = result{Outputs: []map[string]string{}, Error: err.Error()}
				break
			}
			published := map[string]string{}
			for k, v := range labels {
				if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
					if res.Dropped == nil {
						res.Dropped = map[string]string{}
					}
					res.Dropped[k] = v
					continue
				}
				published[k] = v
			}
			labels = published
			seen := false
			for _, o := range res.Outputs {
				seen = seen || reflect.DeepEqual(untimed(o), untimed(labels))
			}
			if !seen {
				res.Outputs = append(res.Outputs, labels)
			}
		}
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gfd-judge:", err)
		os.Exit(2)
	}
}
