/* Sleeps past any reasonable wall limit: expected verdict timeout. */
#include <unistd.h>

int main(void) {
    sleep(3600);
    return 0;
}
