/* Test double of the NVML library (`libnvidia-ml.so.1`) for the field cases of
 * `shared/fixtures/field/README.md` ("NVIDIA MIG with sparse indices", "NVML start-up states"):
 * built by `fake_nvml.rs` into a temporary directory and put on `LD_LIBRARY_PATH` of a child
 * `ganglion` process, which then loads it exactly as it loads the real driver's library. It
 * exports only the NVML functions the inventory calls; any other is absent, which the node reads
 * as "not supported". The scenario is chosen with the environment variable FAKE_NVML:
 *
 *   rm-mismatch   nvmlInit_v2 answers NVML_ERROR_LIB_RM_VERSION_MISMATCH (driver upgraded, old
 *                 kernel module loaded)
 *   mig-a100      one A100-PCIE-40GB (GPU-3b722aa5-…) with MIG on: nvmlDeviceGetMaxMigDeviceCount
 *                 7, MIG devices at indices 0-2 (3g.20gb, 2g.10gb, 1g.5gb), NotFound for 3-6
 *   unidentified  an L4, then a device whose name is "" and whose memory is 0
 *   l4            one L4
 *
 * Types and error codes as in NVIDIA's nvml.h. */

#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
};

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

typedef struct fake_device {
    const char *name;
    const char *uuid;
    unsigned long long total;
    int mig_enabled;
    int is_mig;
} fake_device;

typedef fake_device *nvmlDevice_t;

#define MIB (1ULL << 20)

static fake_device A100 = {"NVIDIA A100-PCIE-40GB", "GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078",
                           40960 * MIB, 1, 0};
static fake_device A100_MIG[3] = {
    {"NVIDIA A100-PCIE-40GB MIG 3g.20gb", "MIG-23de08f7-6fcc-5be3-9094-cc3b4162f0bb", 19968 * MIB, 0, 1},
    {"NVIDIA A100-PCIE-40GB MIG 2g.10gb", "MIG-9d822d55-dc61-5acb-8c24-544828b47b03", 9856 * MIB, 0, 1},
    {"NVIDIA A100-PCIE-40GB MIG 1g.5gb", "MIG-5f16849a-8ae9-571a-bc2c-486916c4a324", 4864 * MIB, 0, 1},
};
static fake_device L4 = {"NVIDIA L4", "GPU-00000000-0000-4000-8000-0000000000l4", 23034 * MIB, 0, 0};
static fake_device NAMELESS = {"", "GPU-00000000-0000-4000-8000-00000000bad0", 0, 0, 0};

static const char *scenario(void) {
    const char *s = getenv("FAKE_NVML");
    return s ? s : "";
}

static int count(void) {
    const char *s = scenario();
    if (strcmp(s, "mig-a100") == 0 || strcmp(s, "l4") == 0) return 1;
    if (strcmp(s, "unidentified") == 0) return 2;
    return 0;
}

static nvmlReturn_t copy(const char *from, char *to, unsigned int length) {
    if (to == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(from) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(to, from);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
    if (strcmp(scenario(), "rm-mismatch") == 0) return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
    *n = (unsigned int)count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    return copy("535.230.02", version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
    *v = 12020;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    const char *s = scenario();
    if ((int)index >= count()) return NVML_ERROR_INVALID_ARGUMENT;
    if (strcmp(s, "mig-a100") == 0) *device = &A100;
    else if (strcmp(s, "unidentified") == 0) *device = index == 0 ? &L4 : &NAMELESS;
    else *device = &L4;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    return copy(d->name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    return copy(d->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    m->total = d->total;
    m->reserved = 0;
    m->free = d->total;
    m->used = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
    if (d->name[0] == '\0') return NVML_ERROR_NOT_SUPPORTED;
    *major = 8;
    *minor = d == &L4 ? 9 : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    if (d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *current = (unsigned int)d->mig_enabled;
    *pending = (unsigned int)d->mig_enabled;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *n) {
    if (!d->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
    *n = 7;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index,
                                                 nvmlDevice_t *mig) {
    if (!d->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= 7) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= 3) return NVML_ERROR_NOT_FOUND;
    *mig = &A100_MIG[index];
    return NVML_SUCCESS;
}
