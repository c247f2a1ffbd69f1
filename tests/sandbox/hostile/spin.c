/* Burns CPU forever: expected verdict timeout (CPU or wall limit). */
int main(void) {
    volatile unsigned long n = 0;
    for (;;)
        n++;
}
