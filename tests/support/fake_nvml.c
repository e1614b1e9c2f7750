/* A stand-in for libnvidia-ml.so.1 (NVIDIA's NVML), for tests of envgen.machine_gpus and
 * --driver auto / --gpu auto on machines without a GPU. Built at test time with the system's
 * C compiler (tests/unit/test_machine_gpus.py: cc -shared -fPIC -o DIR/libnvidia-ml.so.1) and
 * found by NVIDIA's Python binding (pynvml loads "libnvidia-ml.so.1") through LD_LIBRARY_PATH,
 * in a process of its own. The functions have NVML's C signatures
 * (https://docs.nvidia.com/deploy/nvml-api/); what they answer is read from the environment
 * at each call, so one build serves every test:
 *
 *   FAKE_NVML_INIT=N        nvmlInitWithFlags / nvmlInit_v2 return N (9: driver not loaded)
 *   FAKE_NVML_SLEEP=S       they sleep S seconds first (a hung driver)
 *   FAKE_NVML_DRIVER=V      the driver version (default 550.54.15)
 *   FAKE_NVML_GPUS=...      the GPUs: "NAME|MAJOR.MINOR;NAME|MAJOR.MINOR" (default: none)
 *   FAKE_NVML_HANDLE_RC=I:N nvmlDeviceGetHandleByIndex_v2(I) returns N (4: no permission)
 *   FAKE_NVML_LOG=PATH      each init and shutdown appends a line there
 *
 * Built with -DNO_ERROR_STRING it lacks nvmlErrorString; with -DNO_COUNT_V2 it lacks
 * nvmlDeviceGetCount_v2 (an NVML older than 5.319).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

static void note(const char *what) {
    const char *path = getenv("FAKE_NVML_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) { fprintf(f, "%s\n", what); fclose(f); }
}

/* the index-th GPU entry of FAKE_NVML_GPUS into name/cc; 0 when there is none */
static int gpu_entry(unsigned int index, char *name, size_t name_len, int *major, int *minor) {
    const char *all = getenv("FAKE_NVML_GPUS");
    if (!all || !*all) return 0;
    const char *p = all;
    for (unsigned int i = 0; i < index; i++) {
        p = strchr(p, ';');
        if (!p) return 0;
        p++;
    }
    const char *end = strchr(p, ';');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *bar = memchr(p, '|', len);
    size_t nlen = bar ? (size_t)(bar - p) : len;
    if (name) {
        if (nlen >= name_len) nlen = name_len - 1;
        memcpy(name, p, nlen);
        name[nlen] = '\0';
    }
    if (major && minor) {
        *major = *minor = 0;
        if (bar) sscanf(bar + 1, "%d.%d", major, minor);
    }
    return 1;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *sleep_for = getenv("FAKE_NVML_SLEEP");
    if (sleep_for) sleep((unsigned int)atoi(sleep_for));
    const char *rc = getenv("FAKE_NVML_INIT");
    note("init");
    return rc ? atoi(rc) : 0;
}

nvmlReturn_t nvmlInit_v2(void) {
    return nvmlInitWithFlags(0);
}

nvmlReturn_t nvmlShutdown(void) {
    note("shutdown");
    return 0;
}

#ifndef NO_ERROR_STRING
const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case 0: return "Success";
    case 4: return "Insufficient Permissions";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}
#endif

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    const char *v = getenv("FAKE_NVML_DRIVER");
    if (!v) v = "550.54.15";
    if (strlen(v) + 1 > length) return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
    strcpy(version, v);
    return 0;
}

#ifndef NO_COUNT_V2
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    unsigned int n = 0;
    while (gpu_entry(n, NULL, 0, NULL, NULL)) n++;
    *count = n;
    return 0;
}
#endif

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    const char *rc = getenv("FAKE_NVML_HANDLE_RC");
    unsigned int at;
    int code;
    if (rc && sscanf(rc, "%u:%d", &at, &code) == 2 && at == index) return code;
    if (!gpu_entry(index, NULL, 0, NULL, NULL)) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *device = (nvmlDevice_t)(size_t)(index + 1);
    return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    unsigned int index = (unsigned int)((size_t)device - 1);
    return gpu_entry(index, name, length, NULL, NULL) ? 0 : 2;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    unsigned int index = (unsigned int)((size_t)device - 1);
    return gpu_entry(index, NULL, 0, major, minor) ? 0 : 2;
}
