/*
 * A fake libcuda.so.1 for the GFD judge: the CUDA driver calls GFD's tegra strategy makes
 * (k8s-device-plugin internal/cuda/cuda.go: cuInit, cuDriverGetVersion, cuDeviceGetCount,
 * cuDeviceGet, cuDeviceGetName, cuDeviceTotalMem, cuDeviceGetAttribute), each answered from
 * a recording. The harness (tests/e2e/gfd/cuda.go) reads the fixture's cuda.json and puts its
 * answers in the environment variable FAKE_CUDA_ANSWERS, one call a line:
 *
 *   <call> <CUresult> [<device> [<attribute>]] [<value>]
 *
 * e.g. "cuDeviceGetName 0 0 Orin", "cuDeviceGetAttribute 0 0 75 8", "cuInit 100". A call
 * the answers lack returns CUDA_ERROR_NOT_SUPPORTED (801). Built by tests/e2e/build-gfd.sh
 * into tests/e2e/bin/fakecuda/libcuda.so.1; the judge runs with that directory on
 * LD_LIBRARY_PATH only for a fixture with a cuda.json (otherwise there is no libcuda).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
#define NOT_SUPPORTED 801
#define INVALID_DEVICE 101

/* The answer line of call (with its device / attribute keys when >= 0): its result, and
 * its value text copied into value (may be empty). */
static CUresult find(const char *call, int dev, int attr, char *value, size_t size) {
    const char *all = getenv("FAKE_CUDA_ANSWERS");
    char line[512];
    value[0] = '\0';
    while (all && *all) {
        const char *end = strchr(all, '\n');
        size_t n = end ? (size_t)(end - all) : strlen(all);
        if (n < sizeof line) {
            char name[64];
            int result = 0, used = 0, d = -1, a = -1;
            memcpy(line, all, n);
            line[n] = '\0';
            if (sscanf(line, "%63s %d%n", name, &result, &used) == 2 && strcmp(name, call) == 0) {
                const char *rest = line + used;
                int more = 0;
                if (dev >= 0 && sscanf(rest, " %d%n", &d, &more) == 1) rest += more;
                if (attr >= 0 && sscanf(rest, " %d%n", &a, &more) == 1) rest += more;
                if (d == dev && a == attr) {
                    while (*rest == ' ') rest++;
                    snprintf(value, size, "%s", rest);
                    return result;
                }
            }
        }
        all = end ? end + 1 : NULL;
    }
    return NOT_SUPPORTED;
}

static CUresult number(const char *call, int dev, int attr, long long *out) {
    char value[256];
    CUresult r = find(call, dev, attr, value, sizeof value);
    if (r == 0) *out = strtoll(value, NULL, 10);
    return r;
}

CUresult cuInit(unsigned int flags) {
    char value[8];
    (void)flags;
    return find("cuInit", -1, -1, value, sizeof value);
}

CUresult cuDriverGetVersion(int *version) {
    long long v = 0;
    CUresult r = number("cuDriverGetVersion", -1, -1, &v);
    if (r == 0) *version = (int)v;
    return r;
}

CUresult cuDeviceGetCount(int *count) {
    long long v = 0;
    CUresult r = number("cuDeviceGetCount", -1, -1, &v);
    if (r == 0) *count = (int)v;
    return r;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    int count = 0;
    CUresult r = cuDeviceGetCount(&count);
    if (r != 0) return r;
    if (ordinal < 0 || ordinal >= count) return INVALID_DEVICE;
    *device = ordinal;
    return 0;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    char value[256];
    CUresult r = find("cuDeviceGetName", dev, -1, value, sizeof value);
    if (r == 0 && len > 0) snprintf(name, (size_t)len, "%s", value);
    return r;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
    long long v = 0;
    CUresult r = number("cuDeviceTotalMem", dev, -1, &v);
    if (r == 0) *bytes = (size_t)v;
    return r;
}

CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    long long v = 0;
    CUresult r = number("cuDeviceGetAttribute", dev, attrib, &v);
    if (r == 0) *pi = (int)v;
    return r;
}
