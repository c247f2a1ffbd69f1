/* Crashes on a null write: expected verdict signal 11. */
int main(void) {
    volatile int *p = 0;
    *p = 1;
    return 0;
}
