# service.mk -- the redlockd binary and its object files.

SERVICE_SRCS := $(filter-out service/main.c,$(wildcard service/*.c))
SERVICE_OBJS := $(patsubst service/%.c,$(BUILD)/service/%.o,$(SERVICE_SRCS))
MAIN_OBJ     := $(BUILD)/service/main.o

$(BUILD)/service/%.o: service/%.c
	@mkdir -p $(dir $@)
	$(if $(filter 0,$(V)),@echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BINDIR)/redlockd: $(SERVICE_OBJS) $(MAIN_OBJ)
	@mkdir -p $(dir $@)
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

-include $(SERVICE_OBJS:.o=.d) $(MAIN_OBJ:.o=.d)
