// An nvml.Interface answering from an NVML recording (nvml.json, the format of
// nfd_gpu/discovery/nvidia/replay.py): built on go-nvml's mock package, one mock
// function per NVML call that GFD and go-nvlib make. Keys are NVML's C function
// names; {"error": "GpuIsLost"} in place of a value makes the call return that error;
// a key the recording lacks answers ERROR_NOT_SUPPORTED, as replay.py does.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

type record map[string]json.RawMessage

// cString copies s into a C char array: go-nvml v0.13.0's are uint8, v0.13.3's int8
// (the newest GFD's), so the harness builds against either.
func cString[T ~int8 | ~uint8](dst []T, s string) {
	for i := 0; i < len(s) && i < len(dst); i++ {
		dst[i] = T(s[i])
	}
}

// errorCodes maps the recording's error names (pynvml's NVMLError_<Name>) to NVML's codes.
var errorCodes = map[string]nvml.Return{
	"Uninitialized":        nvml.ERROR_UNINITIALIZED,
	"InvalidArgument":      nvml.ERROR_INVALID_ARGUMENT,
	"NotSupported":         nvml.ERROR_NOT_SUPPORTED,
	"NoPermission":         nvml.ERROR_NO_PERMISSION,
	"NotFound":             nvml.ERROR_NOT_FOUND,
	"DriverNotLoaded":      nvml.ERROR_DRIVER_NOT_LOADED,
	"LibraryNotFound":      nvml.ERROR_LIBRARY_NOT_FOUND,
	"FunctionNotFound":     nvml.ERROR_FUNCTION_NOT_FOUND,
	"GpuIsLost":            nvml.ERROR_GPU_IS_LOST,
	"LibRmVersionMismatch": nvml.ERROR_LIB_RM_VERSION_MISMATCH,
}

func errorCode(raw json.RawMessage) (nvml.Return, bool) {
	var e struct {
		Error *string `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Error == nil {
		return nvml.SUCCESS, false
	}
	if code, ok := errorCodes[*e.Error]; ok {
		return code, true
	}
	return nvml.ERROR_UNKNOWN, true
}

// answer decodes the recorded answer of fn into out.
func (r record) answer(fn string, out any) nvml.Return {
	if raw, ok := r["error"]; ok {
		var name string
		_ = json.Unmarshal(raw, &name)
		if code, ok := errorCodes[name]; ok {
			return code
		}
		return nvml.ERROR_UNKNOWN
	}
	raw, ok := r[fn]
	if !ok {
		return nvml.ERROR_NOT_SUPPORTED
	}
	if code, isErr := errorCode(raw); isErr {
		return code
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nvml.ERROR_UNKNOWN
	}
	return nvml.SUCCESS
}

// records are child records by key (profiles, instances).
type records map[string]record

func (r record) children(key string) records {
	out := records{}
	_ = json.Unmarshal(r[key], &out)
	return out
}

type server struct {
	mock.Interface
	mock.ExtendedInterface
	rec     record
	devices []nvml.Device
	symbols map[string]bool
	inits   int
}

// loadRecording builds the library for the recording at path.
func loadRecording(path string) (*server, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &server{rec: record{}, symbols: map[string]bool{}}
	if err := json.Unmarshal(data, &s.rec); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var devs []record
	_ = json.Unmarshal(s.rec["devices"], &devs)
	for _, d := range devs {
		s.note(d)
		s.devices = append(s.devices, s.newDevice(d, nil))
	}
	s.setFuncs()
	return s, nil
}

// note records which NVML functions the recording answers: those are the symbols the
// replayed library has (go-nvlib asks before calling some, LookupSymbol).
func (s *server) note(d record) {
	for k := range d {
		s.symbols[k] = true
	}
	var migs []record
	_ = json.Unmarshal(d["migDevices"], &migs)
	for _, m := range migs {
		for k := range m {
			s.symbols[k] = true
		}
	}
}

func (s *server) ready() nvml.Return {
	if s.inits <= 0 {
		return nvml.ERROR_UNINITIALIZED
	}
	return nvml.SUCCESS
}

func (s *server) setFuncs() {
	s.ExtensionsFunc = func() nvml.ExtendedInterface { return s }
	s.LookupSymbolFunc = func(symbol string) error {
		if s.symbols[symbol] {
			return nil
		}
		return fmt.Errorf("symbol %s not in the recording", symbol)
	}
	s.InitFunc = func() nvml.Return {
		if raw, ok := s.rec["nvmlInit"]; ok {
			if code, isErr := errorCode(raw); isErr {
				return code
			}
		}
		s.inits++
		return nvml.SUCCESS
	}
	s.ShutdownFunc = func() nvml.Return {
		if ret := s.ready(); ret != nvml.SUCCESS {
			return ret
		}
		s.inits--
		return nvml.SUCCESS
	}
	s.SystemGetDriverVersionFunc = func() (string, nvml.Return) {
		var v string
		if ret := s.ready(); ret != nvml.SUCCESS {
			return v, ret
		}
		return v, s.rec.answer("nvmlSystemGetDriverVersion", &v)
	}
	s.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) {
		var v int
		if ret := s.ready(); ret != nvml.SUCCESS {
			return v, ret
		}
		return v, s.rec.answer("nvmlSystemGetCudaDriverVersion", &v)
	}
	s.DeviceGetCountFunc = func() (int, nvml.Return) {
		return len(s.devices), s.ready()
	}
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if ret := s.ready(); ret != nvml.SUCCESS {
			return nil, ret
		}
		if i < 0 || i >= len(s.devices) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return s.devices[i], nvml.SUCCESS
	}
	s.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		if ret := s.ready(); ret != nvml.SUCCESS {
			return nil, ret
		}
		for _, d := range s.devices {
			if u, ret := d.GetUUID(); ret == nvml.SUCCESS && u == uuid {
				return d, nvml.SUCCESS
			}
			migs := d.(*fakeDevice).migs
			for _, m := range migs {
				if m == nil {
					continue
				}
				if u, ret := m.GetUUID(); ret == nvml.SUCCESS && u == uuid {
					return m, nvml.SUCCESS
				}
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
}

type fakeDevice struct {
	mock.Device
	rec    record
	parent *fakeDevice
	migs   []*fakeDevice
}

func (s *server) newDevice(rec record, parent *fakeDevice) *fakeDevice {
	d := &fakeDevice{rec: rec, parent: parent}
	if parent == nil {
		var migs []record
		_ = json.Unmarshal(rec["migDevices"], &migs)
		for _, m := range migs {
			if m == nil {
				d.migs = append(d.migs, nil)
				continue
			}
			d.migs = append(d.migs, s.newDevice(m, d))
		}
	}
	d.setFuncs(s)
	return d
}

func (d *fakeDevice) setFuncs(s *server) {
	str := func(fn string) func() (string, nvml.Return) {
		return func() (string, nvml.Return) {
			var v string
			if ret := s.ready(); ret != nvml.SUCCESS {
				return v, ret
			}
			return v, d.rec.answer(fn, &v)
		}
	}
	num := func(fn string) func() (int, nvml.Return) {
		return func() (int, nvml.Return) {
			var v int
			if ret := s.ready(); ret != nvml.SUCCESS {
				return v, ret
			}
			return v, d.rec.answer(fn, &v)
		}
	}
	pair := func(fn string) func() (int, int, nvml.Return) {
		return func() (int, int, nvml.Return) {
			var v [2]int
			if ret := s.ready(); ret != nvml.SUCCESS {
				return 0, 0, ret
			}
			ret := d.rec.answer(fn, &v)
			return v[0], v[1], ret
		}
	}
	d.GetNameFunc = str("nvmlDeviceGetName")
	d.GetUUIDFunc = str("nvmlDeviceGetUUID")
	d.GetMinorNumberFunc = num("nvmlDeviceGetMinorNumber")
	d.GetMaxMigDeviceCountFunc = num("nvmlDeviceGetMaxMigDeviceCount")
	d.GetGpuInstanceIdFunc = num("nvmlDeviceGetGpuInstanceId")
	d.GetComputeInstanceIdFunc = num("nvmlDeviceGetComputeInstanceId")
	d.GetCudaComputeCapabilityFunc = pair("nvmlDeviceGetCudaComputeCapability")
	d.GetMigModeFunc = pair("nvmlDeviceGetMigMode")
	d.GetVirtualizationModeFunc = func() (nvml.GpuVirtualizationMode, nvml.Return) {
		var v nvml.GpuVirtualizationMode
		if ret := s.ready(); ret != nvml.SUCCESS {
			return v, ret
		}
		return v, d.rec.answer("nvmlDeviceGetVirtualizationMode", &v)
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		var v nvml.Memory
		if ret := s.ready(); ret != nvml.SUCCESS {
			return v, ret
		}
		return v, d.rec.answer("nvmlDeviceGetMemoryInfo", &v)
	}
	d.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
		var v nvml.DeviceAttributes
		if ret := s.ready(); ret != nvml.SUCCESS {
			return v, ret
		}
		return v, d.rec.answer("nvmlDeviceGetAttributes", &v)
	}
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var v nvml.PciInfo
		var rec struct {
			BusID string `json:"busId"`
		}
		if ret := s.ready(); ret != nvml.SUCCESS {
			return v, ret
		}
		ret := d.rec.answer("nvmlDeviceGetPciInfo", &rec)
		cString(v.BusId[:len(v.BusId)-1], rec.BusID)
		legacy := rec.BusID
		if len(legacy) > 4 { // the legacy id has a 4-digit domain: 0000:07:00.0
			legacy = legacy[4:]
		}
		cString(v.BusIdLegacy[:len(v.BusIdLegacy)-1], legacy)
		return v, ret
	}
	d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
		var v nvml.GpuFabricInfo
		if ret := s.ready(); ret != nvml.SUCCESS {
			return v, ret
		}
		return v, d.rec.answer("nvmlDeviceGetGpuFabricInfo", &v)
	}
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) {
		return d.parent != nil, s.ready()
	}
	d.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) {
		if d.parent == nil {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return d.parent, s.ready()
	}
	d.GetMigDeviceHandleByIndexFunc = func(j int) (nvml.Device, nvml.Return) {
		if ret := s.ready(); ret != nvml.SUCCESS {
			return nil, ret
		}
		if _, lost := d.rec["error"]; lost {
			var none int
			return nil, d.rec.answer("", &none)
		}
		if j < 0 || j >= len(d.migs) || d.migs[j] == nil {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return d.migs[j], nvml.SUCCESS
	}
	d.GetGpuInstanceProfileInfoFunc = func(p int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
		var v nvml.GpuInstanceProfileInfo
		if ret := s.ready(); ret != nvml.SUCCESS {
			return v, ret
		}
		if p < 0 || p >= nvml.GPU_INSTANCE_PROFILE_COUNT {
			return v, nvml.ERROR_INVALID_ARGUMENT
		}
		return v, d.rec.children("gpuInstanceProfiles").answerKey(strconv.Itoa(p), &v)
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		if ret := s.ready(); ret != nvml.SUCCESS {
			return nil, ret
		}
		gi, ok := d.rec.children("gpuInstances")[strconv.Itoa(id)]
		if !ok {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return newGpuInstance(s, d, id, gi), nvml.SUCCESS
	}
}

// answerKey decodes the child record at key into out (NOT_SUPPORTED when absent).
func (m records) answerKey(key string, out any) nvml.Return {
	r, ok := m[key]
	if !ok {
		return nvml.ERROR_NOT_SUPPORTED
	}
	raw, _ := json.Marshal(r)
	if err := json.Unmarshal(raw, out); err != nil {
		return nvml.ERROR_UNKNOWN
	}
	return nvml.SUCCESS
}

type instance struct {
	ProfileID uint32 `json:"profileId"`
}

func newGpuInstance(s *server, parent *fakeDevice, id int, rec record) nvml.GpuInstance {
	gi := &mock.GpuInstance{}
	gi.GetInfoFunc = func() (nvml.GpuInstanceInfo, nvml.Return) {
		var v instance
		raw, _ := json.Marshal(rec)
		_ = json.Unmarshal(raw, &v)
		return nvml.GpuInstanceInfo{Device: parent, Id: uint32(id), ProfileId: v.ProfileID}, s.ready()
	}
	gi.GetComputeInstanceByIdFunc = func(ci int) (nvml.ComputeInstance, nvml.Return) {
		if ret := s.ready(); ret != nvml.SUCCESS {
			return nil, ret
		}
		crec, ok := rec.children("computeInstances")[strconv.Itoa(ci)]
		if !ok {
			return nil, nvml.ERROR_NOT_FOUND
		}
		c := &mock.ComputeInstance{}
		c.GetInfoFunc = func() (nvml.ComputeInstanceInfo, nvml.Return) {
			var v instance
			raw, _ := json.Marshal(crec)
			_ = json.Unmarshal(raw, &v)
			return nvml.ComputeInstanceInfo{Device: parent, GpuInstance: gi, Id: uint32(ci), ProfileId: v.ProfileID}, s.ready()
		}
		return c, nvml.SUCCESS
	}
	// As replay.py: the parent's recorded compute instance profile for p, whatever the
	// engine profile (NVML has one, COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED).
	gi.GetComputeInstanceProfileInfoFunc = func(p int, eng int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
		var v nvml.ComputeInstanceProfileInfo
		if ret := s.ready(); ret != nvml.SUCCESS {
			return v, ret
		}
		if p < 0 || p >= nvml.COMPUTE_INSTANCE_PROFILE_COUNT || eng < 0 || eng >= nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT {
			return v, nvml.ERROR_INVALID_ARGUMENT
		}
		return v, parent.rec.children("computeInstanceProfiles").answerKey(strconv.Itoa(p), &v)
	}
	return gi
}
