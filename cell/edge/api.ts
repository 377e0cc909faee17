/**
 * The edge module's face (docs/architecture.md, "Faces"): what another module of cell/ may use of
 * it. No module imports it today: the OAuth server learns whether a device is registered through a
 * `deviceExists` function cell/server.ts hands it, over `Devices` (the device registry, built
 * before the OAuth module). Everything else of the module is behind its routes.
 */
export { Devices, type DeviceRow } from './devices.ts';
