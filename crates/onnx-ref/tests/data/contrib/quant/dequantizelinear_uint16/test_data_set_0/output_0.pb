ByJ`×CD=
åÂG¡÷C8D™™ßCGA„DRh‰DfFjDÌçC‚}DëQJÂáº3D®ÇLCR8/C¸þ9D…+WDáz~DëÑCRøxD)¼kDÍÌ„C
×€ÂEXD
×iD