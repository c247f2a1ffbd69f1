/* Prints which NVIDIA device nodes exist inside ("present NAME" / "absent NAME"), capability
 * nodes included, and the CUDA_VISIBLE_DEVICES the sandbox set ("visible VALUE"). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    char path[64];
    for (int i = 0; i < 8; i++) {
        snprintf(path, sizeof path, "/dev/nvidia%d", i);
        printf("%s %s\n", access(path, F_OK) == 0 ? "present" : "absent", path);
    }
    const char *ctl[] = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                         "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2"};
    for (int i = 0; i < 5; i++)
        printf("%s %s\n", access(ctl[i], F_OK) == 0 ? "present" : "absent", ctl[i]);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    printf("visible %s\n", visible ? visible : "(unset)");
    return 0;
}
